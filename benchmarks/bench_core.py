"""The core targets on the 20 summaries: ingest, re-ingest, `chatbot ask` (new process), `bot.ask`.

Run from the repository root:

    nice -n 10 .venv/bin/python benchmarks/bench_core.py [--runs 5] [--out FILE.json]

Every number is the median of --runs runs. Ingest starts each run from an empty data directory
(nothing cached); the other measurements use the index that the last ingest built. The model is
the offline one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import emit  # noqa: E402

from chatbot import Chatbot, Settings  # noqa: E402

CHATBOT = str(Path(sys.executable).with_name("chatbot"))
QUESTIONS = ROOT.parent / "shared" / "eval" / "dev_seed.jsonl"
QUESTION = "Which theory links Transformers to modern Hopfield networks?"


def _timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    """Print one JSON object of medians (seconds) and the runs behind them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATBOT_", "OPENAI_"))}
    work = Path(tempfile.mkdtemp(prefix="bench-core-"))
    data = work / "data"
    runs: dict[str, list[float]] = {}
    questions: list[str] = []

    def record(name: str, values: list[float]) -> None:
        runs[name] = values
        print(f"{name}: median {statistics.median(values):.3f} s, runs {values}", flush=True)

    try:
        times = []
        for _ in range(args.runs):
            shutil.rmtree(data, ignore_errors=True)
            times.append(_timed([CHATBOT, "--data-dir", str(data), "ingest", "--quiet"], env))
        record("ingest_full", times)
        times = [
            _timed([CHATBOT, "--data-dir", str(data), "ingest", "--quiet"], env)
            for _ in range(args.runs)
        ]
        record("reingest_unchanged", times)
        cmd = [CHATBOT, "--data-dir", str(data), "--model", "offline", "ask", QUESTION]
        record("cli_ask", [_timed(cmd, env) for _ in range(args.runs)])
        bot = Chatbot(Settings.load(env_file=None, data_dir=data, model="offline"))
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            report = bot.ingest(progress=False)
            times.append(time.perf_counter() - started)
            assert not report.changed, report
        record("reingest_unchanged_in_process", times)
        times = []
        for i in range(args.runs):
            # A new folder each run: chromadb keeps one client per path for the whole process.
            fresh = work / f"fresh-{i}"
            fresh_bot = Chatbot(Settings.load(env_file=None, data_dir=fresh, model="offline"))
            started = time.perf_counter()
            report = fresh_bot.ingest(progress=False)
            times.append(time.perf_counter() - started)
            assert report.added == 20, report
        record("ingest_full_in_process", times)
        questions = [
            json.loads(line).get("question") for line in QUESTIONS.read_text().splitlines()
        ]
        questions = [q for q in questions if q]
        bot.ask(questions[0])  # warm: models and keyword index loaded
        per_run = []
        for _ in range(args.runs):
            times = []
            for q in questions:
                started = time.perf_counter()
                bot.ask(q)
                times.append(time.perf_counter() - started)
            per_run.append(statistics.median(times))
        record("bot_ask_warm", per_run)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "load_average": os.getloadavg(),
        "median_s": {k: round(statistics.median(v), 3) for k, v in runs.items()},
        "runs_s": {k: [round(x, 3) for x in v] for k, v in runs.items()},
        "bot_ask_questions": len(questions),
    }
    emit(result, args.out)


if __name__ == "__main__":
    main()
