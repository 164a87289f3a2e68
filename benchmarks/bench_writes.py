"""Chroma write cost per passage under storage variants (documents, schema, HNSW settings, batch).

Embeds the first N ICML abstracts' passages once (kept in WORK/vectors-N.npy), then upserts them
into a new embedded collection per variant and prints milliseconds per passage. Exploratory: one
run per variant, so differences under about 10% are noise on a shared machine.

    nice -n 10 .venv/bin/python benchmarks/bench_writes.py 1500 base,numpy,nodocs,textmeta,nofts
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chatbot.index.documents import Splitter
from chatbot.index.records import Fields, read_records
from chatbot.index.store import embed_text
from chatbot.index.sync import _metadata
from chatbot.settings import Settings

SOURCE = (
    Path(__file__).resolve().parent.parent.parent / "shared/data/icml_2020_2023_abstracts.jsonl"
)


def main() -> None:
    """Time each named variant once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=int)
    parser.add_argument(
        "variants",
        help="comma-separated: base numpy nodocs textmeta nofts threads1 hbatch sync minmeta b1024",
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-writes"))
    args = parser.parse_args()
    import chromadb
    from chromadb.api.types import FtsIndexConfig, Schema, VectorIndexConfig
    from chromadb.config import Settings as ChromaSettings

    docs, _ = read_records(SOURCE, Fields("id", "title", "abstract"))
    settings = Settings.load(env_file=None, data_dir=args.work / "probe")
    splitter = Splitter(settings.chunk_tokens, settings.chunk_overlap)
    items = [
        (p, _metadata(d, i, len(ps)))
        for d in docs[: args.records]
        for ps in [splitter.split(d)]
        for i, p in enumerate(ps)
    ]
    cached = args.work / f"vectors-{args.records}.npy"
    if cached.exists():
        vectors = np.load(cached)
    else:
        from chatbot.index.embeddings.minilm import MiniLMEmbeddings

        vectors = MiniLMEmbeddings().encode([embed_text(p) for p, _ in items])
        args.work.mkdir(parents=True, exist_ok=True)
        np.save(cached, vectors)

    def run(name, run_no, docs_on=True, as_numpy=False, batch=256, meta=None, **create):
        path = args.work / f"chroma-{run_no}"
        shutil.rmtree(path, ignore_errors=True)
        client = chromadb.PersistentClient(
            str(path), settings=ChromaSettings(anonymized_telemetry=False)
        )
        create = create or {"configuration": {"hnsw": {"space": "cosine"}}}
        col = client.create_collection("bench", **create)
        started = time.perf_counter()
        for s in range(0, len(items), batch):
            part, vec = items[s : s + batch], vectors[s : s + batch]
            col.upsert(
                ids=[p.passage_id for p, _ in part],
                documents=[p.text for p, _ in part] if docs_on else None,
                embeddings=vec if as_numpy else vec.tolist(),
                metadatas=[meta(p, m) if meta else m for p, m in part],
            )
        took = time.perf_counter() - started
        print(f"{name:32s} {took:6.2f} s {1000 * took / len(items):5.2f} ms/passage", flush=True)

    no_fts = Schema().create_index(VectorIndexConfig(space="cosine", embedding_function=None))
    no_fts.delete_index(FtsIndexConfig(), key="#document")
    hnsw = lambda **kw: {"configuration": {"hnsw": {"space": "cosine", **kw}}}  # noqa: E731
    variants = {
        "base": dict(name="lists, documents (as ingest)"),
        "numpy": dict(name="numpy vectors", as_numpy=True),
        "nodocs": dict(name="no documents", docs_on=False),
        "textmeta": dict(
            name="text in metadata", docs_on=False, meta=lambda p, m: {**m, "text": p.text}
        ),
        "nofts": dict(name="schema: FTS off", schema=no_fts),
        "threads1": dict(name="hnsw num_threads 1", **hnsw(num_threads=1)),
        "hbatch": dict(name="hnsw batch_size 1000", **hnsw(batch_size=1000)),
        "sync": dict(name="hnsw sync_threshold 100000", **hnsw(sync_threshold=100000)),
        "minmeta": dict(
            name="metadata: ids only",
            meta=lambda p, m: {k: m[k] for k in ("doc_id", "fingerprint", "n_passages", "chunk")},
        ),
        "b1024": dict(name="batches of 1024", batch=1024),
    }
    print(f"{len(items)} passages")
    for n, key in enumerate(args.variants.split(",")):
        run(run_no=n, **variants[key])


if __name__ == "__main__":
    main()
