"""Embedding speed by threading set-up: OpenBLAS's own threads against one BLAS thread per batch.

Run from the repository root:

    nice -n 10 .venv/bin/python benchmarks/bench_threads.py [--passages 64] [--runs 3]

Set-ups, all on the same abstracts (the load average is printed: the machine may be shared):
- "before": OpenBLAS with one thread per core (its own default), batches one after another;
- "blas 1": one BLAS thread, batches one after another;
- "blas 1 + N workers": one BLAS thread, N batches at once on Python threads (the default).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from threadpoolctl import threadpool_limits  # noqa: E402

from chatbot.index.embeddings.minilm import MiniLMEmbeddings  # noqa: E402

ABSTRACTS = ROOT.parent / "shared" / "data" / "icml_2020_2023_abstracts.jsonl"
QUERY = "Which papers propose new methods for offline reinforcement learning with pessimism?"


def main() -> None:
    """Print passages/s and query latency for each set-up."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with ABSTRACTS.open(encoding="utf-8") as f:
        texts = [json.loads(line)["abstract"] for _, line in zip(range(args.passages), f)]
    cores = os.cpu_count() or 1
    emb = MiniLMEmbeddings()
    emb.encode(texts[:4])  # loads the model, which limits BLAS to one thread
    setups = [("before", cores, 1), ("blas 1", 1, 1), (f"blas 1 + {cores} workers", 1, cores)]
    print(f"cpus {cores}, load average {os.getloadavg()[0]:.1f}, {len(texts)} abstracts")
    print(f"{'set-up':<22} {'passages/s':>10} {'query ms':>9}")
    for _ in range(2):  # twice, interleaved, so a change in load shows
        for name, blas, workers in setups:
            with threadpool_limits(limits=blas, user_api="blas"):
                emb.threads = workers
                rates = []
                for _ in range(args.runs):
                    started = time.perf_counter()
                    emb.encode(texts)
                    rates.append(len(texts) / (time.perf_counter() - started))
                queries = []
                for _ in range(21):
                    started = time.perf_counter()
                    emb.embed_query(QUERY)
                    queries.append(time.perf_counter() - started)
            print(
                f"{name:<22} {statistics.median(rates):>10.1f} "
                f"{statistics.median(queries) * 1e3:>9.1f}",
                flush=True,
            )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
