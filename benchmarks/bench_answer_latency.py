"""Offline answer latency: each question asked once in a warm process, several processes.

Every run is a new process: it loads the index and the model, asks one warm-up question that is
not in the set, then asks each question of the files once and times `ask` end to end. Reported:
each run's median and 95th percentile, and the median of the runs' medians.

    .venv/bin/python benchmarks/bench_answer_latency.py DATA_DIR FILE.jsonl… \\
        [--collection abstracts] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import emit  # noqa: E402

WARM_UP = "What problem does this work address?"


def one_run(data_dir: Path, collection: str, questions: list[str]) -> list[float]:
    """Seconds per question, asked once each after a warm-up, in this process."""
    from chatbot import Chatbot, Settings

    bot = Chatbot(Settings.load(env_file=None, data_dir=data_dir, collection=collection))
    bot.ask(WARM_UP)
    times = []
    for q in questions:
        start = time.perf_counter()
        bot.ask(q)
        times.append(time.perf_counter() - start)
    return times


def questions_of(files: list[Path]) -> list[str]:
    out = []
    for f in files:
        for line in f.read_text("utf-8").splitlines():
            if line.strip():
                q = json.loads(line)
                out.append((q.get("turns") or [q["question"]])[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--collection", default="summaries")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    questions = questions_of(args.files)
    if args.child:
        print(json.dumps(one_run(args.data_dir, args.collection, questions)))
        return
    runs = []
    for _ in range(args.runs):
        cmd = [sys.executable, __file__, str(args.data_dir), *map(str, args.files)]
        cmd += ["--collection", args.collection, "--child"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        times = sorted(json.loads(out.strip().splitlines()[-1]))
        runs.append(
            {
                "median_ms": round(statistics.median(times) * 1000, 1),
                "p95_ms": round(times[int(0.95 * (len(times) - 1))] * 1000, 1),
            }
        )
    emit(
        {
            "collection": args.collection,
            "questions": len(questions),
            "runs": runs,
            "median_of_medians_ms": statistics.median(r["median_ms"] for r in runs),
        },
        args.out,
    )


if __name__ == "__main__":
    main()
