"""Benchmark a large collection: title → abstract retrieval, ingest, re-ingest, size, latency.

Run from the repository root (results and exact commands are in docs/benchmarks.md):

    nice -n 10 .venv/bin/python benchmarks/bench_collections.py --label icml \
        ../shared/data/icml_2020_2023_abstracts.jsonl

The abstracts are indexed without their titles (--title-field ''); each paper's title is then a
query whose right answer is that paper's abstract. The index is built once in
WORK/<label>/ (default WORK: /tmp/icml-bench) and reused; every data directory shares the
embedding cache WORK/embedding-cache.sqlite, so a rebuild embeds nothing it has seen before.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import emit  # noqa: E402

from chatbot import Chatbot, Settings  # noqa: E402
from chatbot.index.documents import Splitter  # noqa: E402
from chatbot.index.records import Fields, read_records  # noqa: E402
from chatbot.index.store import embed_text  # noqa: E402

FIELDS = Fields(id="id", title="", text="abstract")
CHATBOT = [str(Path(sys.executable).with_name("chatbot"))]
PASSAGES = 30  # passages retrieved per query; their documents give the top-10 ranking
COLLECTION = "abstracts"


def _run(command: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Wall time, peak RSS of the child (MB, max so far over children) and stdout."""
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    return elapsed, peak, done.stdout.strip()


def _size_mb(*paths: Path) -> float:
    total = 0
    for path in paths:
        for p in [path] if path.is_file() else path.rglob("*"):
            if p.is_file():
                total += p.stat().st_size
    return total / 1e6


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def _scores(rankings: Sequence[list[str]], gold: Sequence[str]) -> dict[str, float]:
    """Recall@1, Recall@10 and MRR@10 of document rankings against one gold document each."""
    r1 = r10 = rr = 0.0
    for ranking, doc in zip(rankings, gold, strict=True):
        top = ranking[:10]
        if top[:1] == [doc]:
            r1 += 1
        if doc in top:
            r10 += 1
            rr += 1.0 / (top.index(doc) + 1)
    n = len(gold)
    return {"recall@1": r1 / n, "recall@10": r10 / n, "mrr@10": rr / n}


def _docs(passage_ids: Sequence[str], doc_of: dict[str, str]) -> list[str]:
    return list(dict.fromkeys(doc_of[p] for p in passage_ids if p in doc_of))


class _Lookup:
    """Query embeddings looked up from a batch computed beforehand (retrieval quality only)."""

    def __init__(self, inner, vectors: dict[str, list[float]]) -> None:
        self.inner, self.vectors = inner, vectors
        self.model_name = inner.model_name

    def embed_query(self, text: str) -> list[float]:
        return self.vectors.get(text) or self.inner.embed_query(text)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]


def build(args, work: Path, env: dict[str, str]) -> dict:
    """Ingest the files with the CLI in a new process (wall time, peak RSS), then re-ingest."""
    data = work / args.label
    cache = work / "embedding-cache.sqlite"
    data.mkdir(parents=True, exist_ok=True)
    if not (data / "embedding-cache.sqlite").exists():
        cache.touch()
        (data / "embedding-cache.sqlite").symlink_to(cache)
    base = [*CHATBOT, "--data-dir", str(data), "--collection", COLLECTION, "ingest", *args.files]
    options = ["--title-field", "", "--text-field", "abstract", "--quiet"]
    out: dict = {}
    wall, peak, line = _run([*base, *options], env)
    out["build"] = {"seconds": round(wall, 1), "peak_rss_mb": peak, "report": line}
    times = []
    for _ in range(args.runs):
        wall, peak, line = _run([*base, *options], env)
        times.append(wall)
    out["reingest_unchanged_cli"] = {
        "median_s": round(statistics.median(times), 2),
        "runs": [round(t, 2) for t in times],
        "report": line,
        "peak_rss_mb": peak,
    }
    out["index_mb"] = round(_size_mb(data / "chroma", data / "bm25"), 1)
    out["embedding_cache_mb"] = round(_size_mb(cache), 1)
    return out


def quality(bot: Chatbot, records: list, queries: int, seed: int) -> dict:
    """Title → abstract retrieval for BM25, dense, hybrid and plain LangChain Chroma."""
    from langchain_chroma import Chroma

    store, retriever = bot.store, bot.retriever
    ids, texts, metas = store.all_passages()
    doc_of = {i: m["doc_id"] for i, m in zip(ids, metas, strict=True)}
    sample = list(records)
    if queries and queries < len(sample):
        sample = random.Random(seed).sample(sample, queries)
    titles = [r["title"] for r in sample]
    gold = [r["id"] for r in sample]
    started = time.perf_counter()
    vectors = dict(zip(titles, store.cache.embed(titles), strict=True))
    embed_s = time.perf_counter() - started
    store.embeddings = _Lookup(store.embeddings, vectors)

    # Plain LangChain: the same passages and vectors in a default Chroma collection,
    # searched with similarity_search (no keyword side, no fusion).
    class Cached:
        model_name = "cached"

        def embed_documents(self, docs: list[str]) -> list[list[float]]:
            return store.cache.embed(docs)

        def embed_query(self, text: str) -> list[float]:
            return store.embeddings.embed_query(text)

    # An in-memory Chroma, as in LangChain's quickstart; add_texts embeds through the cache.
    plain = Chroma(collection_name="plain-langchain", embedding_function=Cached())
    for start in range(0, len(ids), 2000):
        plain.add_texts(
            [
                embed_text_of(t, m)
                for t, m in zip(
                    texts[start : start + 2000], metas[start : start + 2000], strict=True
                )
            ],
            metadatas=[{"doc_id": m["doc_id"]} for m in metas[start : start + 2000]],
            ids=ids[start : start + 2000],
        )

    methods: dict[str, Callable[[str], list[str]]] = {
        "bm25": lambda q: _docs(
            [i for i, _ in retriever.keyword_index().search(q, PASSAGES)], doc_of
        ),
        "dense": lambda q: _docs([i for i, _ in store.nearest(vectors[q], PASSAGES)], doc_of),
        "hybrid": lambda q: _docs(
            [p.passage_id for p in retriever.search(q, PASSAGES).passages], doc_of
        ),
        "langchain similarity_search": lambda q: list(
            dict.fromkeys(d.metadata["doc_id"] for d in plain.similarity_search(q, k=PASSAGES))
        ),
    }
    results: dict = {"queries": len(sample), "query_embedding_s": round(embed_s, 1)}
    for name, search in methods.items():
        started = time.perf_counter()
        rankings = [search(t) for t in titles]
        row = _scores(rankings, gold)
        row["seconds"] = round(time.perf_counter() - started, 1)
        results[name] = {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}
        print(name, results[name], flush=True)
    store.embeddings = store.embeddings.inner
    # The baseline's in-memory copy of the index is the benchmark's, not the chatbot's: drop it
    # before latency is measured (it doubles this process's memory).
    plain.delete_collection()
    return results


def embed_text_of(text: str, meta: dict) -> str:
    """The text the pipeline embedded for a stored passage."""
    from chatbot.index.documents import Passage

    return embed_text(Passage("", meta.get("doc_id", ""), meta.get("title", ""), text))


def latency(bot: Chatbot, records: list, n: int, asks: int, seed: int) -> dict:
    """Retrieval (query embedding included) and offline `ask` latency over paper titles."""
    rng = random.Random(seed + 1)
    titles = [r["title"] for r in rng.sample(records, min(n, len(records)))]
    bot.retriever.search(titles[0])  # load the keyword index and the model first
    times = []
    for title in titles:
        started = time.perf_counter()
        bot.retriever.search(title)
        times.append(time.perf_counter() - started)
    questions = [f"What does the paper '{t}' propose?" for t in titles[:asks]]
    ask_times = []
    for q in questions:
        started = time.perf_counter()
        bot.ask(q)
        ask_times.append(time.perf_counter() - started)
    ms = lambda xs, q: round(_percentile(xs, q) * 1e3, 1)  # noqa: E731
    return {
        "retrieval_queries": len(times),
        "retrieval_median_ms": ms(times, 0.5),
        "retrieval_p95_ms": ms(times, 0.95),
        "ask_questions": len(ask_times),
        "ask_median_ms": ms(ask_times, 0.5),
        "ask_p95_ms": ms(ask_times, 0.95),
    }


def throughput(args, work: Path, records_path: Path) -> dict:
    """Ingest with an empty cache against the embedding model alone, on the same passages.

    Each run embeds the texts with the model alone and ingests them into a new data directory
    (empty cache, new collection); the order alternates between runs, so a machine that gets
    busier or quieter during the benchmark does not favour one side.
    """
    from chatbot.index.embeddings.minilm import MiniLMEmbeddings

    docs, _ = read_records(records_path, FIELDS)
    docs = docs[: args.throughput_records]
    subset = work / "throughput.jsonl"
    by_id = {d.doc_id for d in docs}
    with records_path.open(encoding="utf-8") as f, subset.open("w", encoding="utf-8") as out:
        for line in f:
            if json.loads(line)["id"] in by_id:
                out.write(line)
    model = MiniLMEmbeddings()
    model.encode(["warm up the model"])
    probe = Settings.load(env_file=None, data_dir=work / "throughput", collection="throughput")
    splitter = Splitter(probe.chunk_tokens, probe.chunk_overlap)
    texts = [embed_text(p) for d in docs for p in splitter.split(d)]

    def alone() -> float:
        started = time.perf_counter()
        model.encode(texts)
        return time.perf_counter() - started

    def pipeline(run: int) -> float:
        data = work / f"throughput-{run}"
        shutil.rmtree(data, ignore_errors=True)
        settings = Settings.load(env_file=None, data_dir=data, collection="throughput")
        bot = Chatbot(settings)
        bot.store.embeddings._get_model()
        started = time.perf_counter()
        report = bot.ingest([subset], fields=FIELDS, progress=False)
        elapsed = time.perf_counter() - started
        assert report.passages == len(texts), (report.passages, len(texts))
        return elapsed

    pairs = []
    for run in range(args.throughput_runs):
        if run % 2 == 0:
            a = alone()
            pairs.append((a, pipeline(run)))
        else:
            b = pipeline(run)
            pairs.append((alone(), b))
        print("throughput run", run, [round(x, 2) for x in pairs[-1]], flush=True)
    a = statistics.median(x for x, _ in pairs)
    b = statistics.median(y for _, y in pairs)
    return {
        "records": len(docs),
        "passages": len(texts),
        "runs": [{"model_alone_s": round(x, 2), "ingest_s": round(y, 2)} for x, y in pairs],
        "model_alone_passages_per_s": round(len(texts) / a, 2),
        "ingest_passages_per_s": round(len(texts) / b, 2),
        "pipeline_overhead_pct": round(100 * (b / a - 1), 1),
        # Each pair ran back to back, so its ratio is the least affected by the machine's load.
        "overhead_pct_per_run": [round(100 * (y / x - 1), 1) for x, y in pairs],
        "overhead_pct_median_of_runs": round(
            100 * statistics.median(y / x - 1 for x, y in pairs), 1
        ),
    }


def main() -> None:
    """Run every measurement and print (and save) one JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--label", required=True, help="name of this index under WORK")
    parser.add_argument("--work", type=Path, default=Path("/tmp/icml-bench"))
    parser.add_argument("--queries", type=int, default=0, help="sample of titles (0: all)")
    parser.add_argument("--latency-queries", type=int, default=200)
    parser.add_argument("--asks", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3, help="re-ingest runs (median)")
    parser.add_argument("--throughput-records", type=int, default=0, help="0: skip")
    parser.add_argument("--throughput-runs", type=int, default=3, help="alternating pairs")
    parser.add_argument(
        "--throughput-only", action="store_true", help="skip the index, quality and latency"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.files = [str(f.resolve()) for f in args.files]
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATBOT_", "OPENAI_"))}
    env["PYTHONPATH"] = str(ROOT)

    result: dict = {"label": args.label, "files": args.files, "cpus": os.cpu_count()}
    result["load_average_start"] = os.getloadavg()
    records = []
    for f in args.files:
        with open(f, encoding="utf-8") as fh:
            records += [json.loads(line) for line in fh if line.strip()]
    result["documents"] = len(records)
    if not args.throughput_only:
        result.update(build(args, work, env))
        print(json.dumps(result, indent=2), flush=True)
        settings = Settings.load(
            env_file=None, data_dir=work / args.label, collection=COLLECTION, model="offline"
        )
        bot = Chatbot(settings)
        result["passages"] = bot.store.count()
        result["quality"] = quality(bot, records, args.queries, args.seed)
        result["latency"] = latency(bot, records, args.latency_queries, args.asks, args.seed)
        print(json.dumps(result["latency"]), flush=True)
    if args.throughput_records:
        result["throughput"] = throughput(args, work, Path(args.files[0]))
    result["load_average_end"] = os.getloadavg()
    result["peak_rss_mb_this_process"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    emit(result, args.out)


if __name__ == "__main__":
    main()
