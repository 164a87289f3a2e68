"""Benchmark MiniLMEmbeddings: model load time, passages/s per batch size, query latency."""

# Run from the repository root (every figure is the median of --runs runs):
#
#     .venv/bin/python benchmarks/bench_embeddings.py [--passages 200] [--words 120] [--runs 3]
#
# Passages are ICML 2020-2023 abstracts cut to ~120 words, the size of an indexed chunk. The
# "cpu/wall" column is process CPU time over wall time: about 2 on two cores means BLAS (or our
# own threads) keep both busy. The load average is printed because the machine may be shared:
# then wall-clock figures mostly measure the other processes, and "passages/cpu-s" (passages per
# second of our own CPU time) is the steadier figure to compare code changes by.

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Running the file directly puts benchmarks/ on sys.path, not the repository root.
sys.path.insert(0, str(ROOT))

from chatbot.index.embeddings.minilm import MiniLMEmbeddings  # noqa: E402

ABSTRACTS = ROOT.parent / "shared" / "data" / "icml_2020_2023_abstracts.jsonl"
QUERY = "Which papers propose new methods for offline reinforcement learning with pessimism?"


def load_passages(n: int, words: int, source: Path = ABSTRACTS) -> list[str]:
    """Return n abstracts, each cut to its first `words` words (short abstracts skipped)."""
    passages = []
    with source.open(encoding="utf-8") as f:
        for line in f:
            abstract = json.loads(line).get("abstract", "").split()
            if len(abstract) >= words:
                passages.append(" ".join(abstract[:words]))
            if len(passages) == n:
                break
    return passages


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median wall seconds of fn() over runs calls, and CPU seconds / wall seconds overall."""
    walls, cpu0 = [], time.process_time()
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - start)
    return statistics.median(walls), (time.process_time() - cpu0) / sum(walls)


def main() -> None:
    """Print load time, query latency, then passages/s for each batch size."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, default=200)
    parser.add_argument("--words", type=int, default=120)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--abstracts", type=Path, default=ABSTRACTS, help="JSON Lines file")
    args = parser.parse_args()

    passages = load_passages(args.passages, args.words, args.abstracts)
    emb = MiniLMEmbeddings()
    start = time.perf_counter()
    model = emb._get_model()
    load_s = time.perf_counter() - start
    n_tokens = sum(len(ids) for ids in model.tokenize(passages))
    q_tokens = len(model.tokenize([QUERY])[0])
    emb.encode(passages[:32])  # warm-up: the first calls pay for page faults and BLAS start-up

    # One query is one batch of one text, so its latency does not depend on batch_size.
    query_runs = [timed(lambda: emb.embed_query(QUERY), 50) for _ in range(args.runs)]
    query_s = statistics.median(wall for wall, _ in query_runs)
    query_cpu_s = statistics.median(wall * ratio for wall, ratio in query_runs)

    print(f"load average: {' '.join(f'{v:.1f}' for v in os.getloadavg())}  cpus: {os.cpu_count()}")
    print(f"model load (weights + tokenizer, first use): {load_s * 1e3:.0f} ms")
    print(
        f"query: {len(QUERY.split())} words / {q_tokens} tokens, "
        f"median of {args.runs} x 50 calls: {query_s * 1e3:.2f} ms ({query_cpu_s * 1e3:.2f} ms CPU)"
    )
    print(f"passages: {len(passages)} of {args.words} words, {n_tokens / len(passages):.0f} tokens")
    print()
    print(
        f"{'batch':>5}  {'passages/s':>10}  {'tokens/s':>8}  {'seconds':>7}  {'cpu/wall':>8}"
        f"  {'passages/cpu-s':>14}"
    )
    for batch_size in args.batch_sizes:
        wall, ratio = timed(lambda bs=batch_size: emb.encode(passages, batch_size=bs), args.runs)
        print(
            f"{batch_size:>5}  {len(passages) / wall:>10.1f}  {n_tokens / wall:>8.0f}"
            f"  {wall:>7.2f}  {ratio:>8.2f}  {len(passages) / (wall * ratio):>14.1f}"
        )
    print(f"load average: {' '.join(f'{v:.1f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
