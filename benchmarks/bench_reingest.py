"""Re-ingest of an unchanged collection inside one process (no import or model-load time).

Run from the repository root, on a data directory built by bench_collections.py:

    nice -n 10 .venv/bin/python benchmarks/bench_reingest.py /tmp/icml-bench/icml-5365 FILE.jsonl…
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chatbot import Chatbot, Settings  # noqa: E402
from chatbot.index.records import Fields  # noqa: E402


def main() -> None:
    """Print the median of 3 in-process re-ingests, and the time to open the store."""
    data, *files = sys.argv[1:]
    started = time.perf_counter()
    bot = Chatbot(Settings.load(env_file=None, data_dir=Path(data), collection="abstracts"))
    count = bot.store.count()
    opened = time.perf_counter() - started
    times = []
    for _ in range(3):
        started = time.perf_counter()
        report = bot.ingest(files, fields=Fields(title="", text="abstract"), progress=False)
        times.append(time.perf_counter() - started)
    print(f"store opened in {opened:.2f} s ({count} passages); {report}")
    print(f"re-ingest unchanged: median {statistics.median(times):.2f} s, runs {times}")


if __name__ == "__main__":
    main()
