"""Splitting time against text size: it should grow in proportion (the same seconds per MB).

Two kinds of text, built from the corpus's words: sentences without a paragraph break (the case
a long plain-text file or log is) and the same with a blank line every ten sentences or so.
Each size is split 3 times; the medians are reported, with the time until the first passages
are out (ingest starts embedding then). Run from the repository root:

    nice -n 10 .venv/bin/python benchmarks/bench_split.py [--sizes 1 2 4 8] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chatbot.index import documents as corpus  # noqa: E402
from chatbot.index.documents import Document, Splitter  # noqa: E402

MB = 1024 * 1024
RUNS = 3


def prose(size: int, paragraphs: bool, seed: int = 0) -> str:
    """About `size` characters of sentences made of the corpus's words."""
    words = (ROOT / "corpus" / "06-generative-social-choice.md").read_text("utf-8").split()
    rng = random.Random(seed)
    out, n = [], 0
    while n < size:
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(8, 25))) + ". "
        if paragraphs and rng.random() < 0.1:
            sentence += "\n\n"
        out.append(sentence)
        n += len(sentence)
    return "".join(out)


def measure(splitter: Splitter, text: str) -> tuple[float, float, int]:
    """Seconds to split `text`, seconds until its first passages are out, passages."""
    doc = Document("bench", "Bench", text, "/bench.txt")
    start = time.perf_counter()
    first, passages = None, 0
    # An older checkout (this script copied into it, for comparison) splits all at once.
    blocks = splitter.blocks(doc) if hasattr(splitter, "blocks") else [splitter.split(doc)]
    for block in blocks:
        first = first if first is not None else time.perf_counter() - start
        passages += len(block)
    return time.perf_counter() - start, first or 0.0, passages


def main() -> None:
    """Print a table of medians and save them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1, 2, 4, 8], help="in MB")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/split.json")
    args = parser.parse_args()
    splitter = Splitter()
    measure(splitter, "Load the tokenizer first.")
    rows = []
    print(f"{'text':<11} {'MB':>4} {'passages':>9} {'median s':>9} {'s per MB':>9} {'first s':>8}")
    for kind in ("sentences", "paragraphs"):
        for size in args.sizes:
            text = prose(int(size * MB), paragraphs=kind == "paragraphs")
            runs = [measure(splitter, text) for _ in range(RUNS)]
            seconds = statistics.median(r[0] for r in runs)
            first = statistics.median(r[1] for r in runs)
            row = {
                "text": kind,
                "mb": size,
                "passages": runs[0][2],
                "seconds": [round(r[0], 3) for r in runs],
                "median_s": round(seconds, 3),
                "s_per_mb": round(seconds / size, 3),
                "first_passages_s": round(first, 3),
            }
            rows.append(row)
            print(
                f"{kind:<11} {size:>4g} {row['passages']:>9} {seconds:>9.2f} "
                f"{row['s_per_mb']:>9.3f} {first:>8.3f}",
                flush=True,
            )
    result = {
        "benchmark": "split",
        "runs": RUNS,
        "block_chars": getattr(corpus, "BLOCK_CHARS", None),
        "chunk_tokens": splitter.chunk_tokens,
        "chunk_overlap": splitter.chunk_overlap,
        "python": platform.python_version(),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
