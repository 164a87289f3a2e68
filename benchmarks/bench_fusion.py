"""How to fuse dense and BM25 results: reciprocal rank against score fusion, over keyword weights.

Run from the repository root, on a data directory built by bench_collections.py:

    nice -n 10 .venv/bin/python benchmarks/bench_fusion.py /tmp/icml-bench/all-11866 \
        ../shared/data/icml_2020_2023_abstracts.jsonl ../shared/data/iclr_2020_2024_abstracts.jsonl

Every title is a query (title -> abstract, as in bench_collections.py); each side's 40 best
passages are fetched once and every fusion is computed from them. Results are given per input
file, so a weight can be chosen on one file's titles and checked on the other's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_collections import COLLECTION, _docs, _scores

from chatbot import Chatbot, Settings
from chatbot.retrieve.hybrid import fuse

DEPTH = 40
WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7)


def rrf(dense, keyword, k: int = 60) -> dict[str, float]:
    """Reciprocal-rank fusion, equal weights: the rank-based alternative to score fusion."""
    fused: dict[str, float] = {}
    for hits in (dense, keyword):
        for rank, (pid, _) in enumerate(hits):
            fused[pid] = fused.get(pid, 0.0) + 1.0 / (k + rank + 1)
    return fused


def main() -> None:
    """Print, per input file, Recall@1, Recall@10 and MRR@10 of every fusion."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    settings = Settings.load(env_file=None, data_dir=args.data_dir, collection=COLLECTION)
    bot = Chatbot(settings)
    store, keyword = bot.store, bot.retriever.keyword_index()
    ids, _, metas = store.all_passages()
    doc_of = {i: m["doc_id"] for i, m in zip(ids, metas, strict=True)}
    methods: dict[str, Callable] = {
        "bm25": lambda d, k: {pid: s for pid, s in k},
        "dense": lambda d, k: {pid: s for pid, s in d},
        "rrf k=60": rrf,
    }
    for w in WEIGHTS:
        methods[f"score fusion, keyword weight {w}"] = lambda d, k, w=w: fuse(d, k, w)
    result: dict = {}
    for path in args.files:
        records = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
        titles = [r["title"] for r in records]
        vectors = store.cache.embed(titles)
        rankings: dict[str, list[list[str]]] = {name: [] for name in methods}
        for title, vector in zip(titles, vectors, strict=True):
            dense = store.nearest(vector, DEPTH)
            hits = keyword.search(title, DEPTH)
            for name, method in methods.items():
                fused = method(dense, hits)
                order = sorted(fused, key=lambda pid: (-fused[pid], pid))
                rankings[name].append(_docs(order, doc_of))
        gold = [r["id"] for r in records]
        result[path.name] = {
            name: {k: round(v, 4) for k, v in _scores(r, gold).items()}
            for name, r in rankings.items()
        }
        for name, row in result[path.name].items():
            print(f"{path.name:40} {name:36} {row}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
