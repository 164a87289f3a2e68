"""Query latency on a built collection, repeated: retrieval and offline `ask` medians per run.

Run from the repository root, on a data directory built by bench_collections.py:

    nice -n 10 .venv/bin/python benchmarks/bench_latency.py /tmp/icml-bench/all-11866 \
        FILE.jsonl… --runs 5

Each run draws its own 200 titles (seed = run number), so a run is not a replay of the last one
with every page already cached.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_collections import COLLECTION, latency
from common import emit

from chatbot import Chatbot, Settings


def main() -> None:
    """Print each run's latency figures and the medians over runs, as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--asks", type=int, default=30)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    records = []
    for f in args.files:
        with f.open(encoding="utf-8") as fh:
            records += [json.loads(line) for line in fh if line.strip()]
    settings = Settings.load(
        env_file=None, data_dir=args.data_dir, collection=COLLECTION, model="offline"
    )
    bot = Chatbot(settings)
    result: dict = {"documents": len(records), "passages": bot.store.count()}
    result["load_average_start"] = os.getloadavg()
    runs = []
    for run in range(args.runs):
        runs.append(latency(bot, records, args.queries, args.asks, seed=run))
        print(json.dumps(runs[-1]), flush=True)
    result["runs"] = runs
    result["median_of_runs"] = {
        key: statistics.median(r[key] for r in runs) for key in runs[0] if key.endswith("_ms")
    }
    result["load_average_end"] = os.getloadavg()
    emit(result, args.out)


if __name__ == "__main__":
    main()
