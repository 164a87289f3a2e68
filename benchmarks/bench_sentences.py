"""Sentence splitters compared on a hand-labelled set: boundaries, errors per kind, and speed.

Every candidate runs behind the same structure step (chatbot.text.sentences._blocks: front matter,
headings, list markers and paragraph breaks are decided first), so only the prose rules differ;
each is measured alone and with the continuation rule of chatbot.text.sentences (a piece starting
with a digit or with , ; : ) ] } - continues the sentence before it). The first row is the old
regex as the package used it, on the whole text. Quality is exact-match sentence F1 over
benchmarks/data/sentences.jsonl; a text counts as an error of each of its categories when the
sentences differ from the labels. Speed is the median of 3 runs over the first 1,000 abstracts
of the JSONL file given (ms). Candidates that are not installed are skipped. From the
repository root:

    .venv/bin/pip install pysbd blingfire syntok nupunkt   # sentencex is a dependency
    nice -n 10 .venv/bin/python benchmarks/bench_sentences.py --abstracts FILE [--only NAME ...]"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chatbot.text import sentences  # noqa: E402

Span = tuple[int, int]
DATA = ROOT / "benchmarks" / "data" / "sentences.jsonl"
RUNS = 3
# Columns of the table: where a text comes from, then what makes it hard.
CATEGORIES = ["corpus", "abstract", "note", "held-out", "abbreviation", "figure", "citation"]
CATEGORIES += ["heading", "list", "ellipsis", "quote", "question", "other"]
# The old splitter of chatbot/extract.py, kept here as the baseline it was measured as.
_OLD_END = re.compile(r"(?:(?<=[.!?…])|(?<=[.!?…][\"”’)]))\s+(?=[\"“‘(A-Z0-9])")


def align(text: str, parts: list[str]) -> list[Span]:
    """Spans of `parts` (pieces of `text` in order, maybe re-spaced) found in `text`."""
    spans, at = [], 0
    for part in parts:
        part = part.strip()
        if not part:
            continue
        start = text.find(part, at)
        if start < 0:  # the library changed the text: give up on this piece
            continue
        spans.append((start, start + len(part)))
        at = start + len(part)
    return spans


def baseline(text: str) -> list[Span]:
    """The regex splitter the package used before (chatbot/extract.py)."""
    parts = [p for p in _OLD_END.split(text) if p.strip() and p.strip() not in ("...", "…")]
    return align(text, parts)


def candidates() -> dict[str, tuple[str, Callable[[str], list[Span]]]]:
    """Name -> (version, prose splitter) for each installed candidate."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, tuple[str, Callable[[str], list[Span]]]] = {"old regex": ("-", baseline)}

    def have(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    if v := have("pysbd"):
        import pysbd

        seg = pysbd.Segmenter(language="en", clean=False, char_span=True)
        out["pysbd"] = (v, lambda t: [(s.start, s.end) for s in seg.segment(t)])
    if v := have("blingfire"):
        import blingfire

        out["blingfire"] = (v, lambda t: blingfire.text_to_sentences_and_offsets(t)[1] if t else [])
    if v := have("syntok"):
        from syntok import segmenter

        def syntok_split(t: str) -> list[Span]:
            spans = []
            for para in segmenter.analyze(t):
                for sent in para:
                    spans.append((sent[0].offset, sent[-1].offset + len(sent[-1].value)))
            return spans

        out["syntok"] = (v, syntok_split)
    if v := have("sentencex"):
        out["sentencex"] = (v, sentences._library)  # the one chatbot.text.sentences uses
    if v := have("nupunkt"):
        import nupunkt

        out["nupunkt"] = (v, lambda t: list(nupunkt.sent_spans(t)))
    return out


def difference(text_id: str, got: list[str], want: list[str]) -> dict:
    """What a splitter got wrong on one text: sentences it made that are not labelled, and back."""
    return {
        "id": text_id,
        "extra": [s[:160] for s in got if s not in want],
        "missing": [s[:160] for s in want if s not in got],
    }


def score(spans: Callable[[str], list[Span]], rows: list[dict]) -> dict:
    """Exact-match sentence precision, recall and F1, and the texts got wrong per category."""
    tp = fp = fn = 0
    wrong: Counter[str] = Counter()
    total: Counter[str] = Counter()
    examples_all: list[dict] = []
    for row in rows:
        text = row["text"]
        got = [text[a:b] for a, b in spans(text)]
        want = row["sentences"]
        common = sum((Counter(got) & Counter(want)).values())
        tp, fp, fn = tp + common, fp + len(got) - common, fn + len(want) - common
        for cat in row["categories"]:
            total[cat] += 1
            wrong[cat] += got != want
        if got != want:
            examples_all.append(difference(row["id"], got, want))
    p, r = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
    return {
        "precision": round(p, 4),
        "recall": round(r, 4),
        "f1": round(2 * p * r / max(p + r, 1e-9), 4),
        "texts_wrong": len(examples_all),
        "wrong_by_category": {c: [wrong[c], total[c]] for c in sorted(total)},
        "wrong": examples_all,
    }


def speed(spans: Callable[[str], list[Span]], texts: list[str]) -> float:
    """Median milliseconds to split all of `texts` (3 runs)."""
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        for text in texts:
            spans(text)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    """Print a Markdown table of every installed candidate and save the numbers as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA, help="labelled texts (JSONL)")
    ap.add_argument("--abstracts", type=Path, required=True, help="JSONL with an 'abstract' field")
    ap.add_argument("--n", type=int, default=1000, help="abstracts to time")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/sentences.json")
    ap.add_argument("--only", nargs="*", help="candidate names to run (default: all installed)")
    args = ap.parse_args()
    rows = [json.loads(line) for line in args.data.read_text("utf-8").splitlines() if line]
    with args.abstracts.open(encoding="utf-8") as f:
        texts = [json.loads(line)["abstract"] for _, line in zip(range(args.n), f)]
    cats = [c for c in CATEGORIES if any(c in row["categories"] for row in rows)]
    # The old regex as the package used it: on the whole text, headings and all.
    runs: dict[str, tuple[str, Callable[[str], list[Span]]]] = {
        "old regex on the whole text": ("-", baseline)
    }
    for name, (ver, split) in candidates().items():
        if args.only and name not in args.only:
            continue
        for join in (False, True):
            key = name + (" + continuation rule" if join else "")
            runs[key] = (ver, partial(sentences._spans_with, split, join=join))
    results = {}
    for key, (ver, spans) in runs.items():
        results[key] = {"version": ver, **score(spans, rows), "ms": round(speed(spans, texts), 1)}
    n_sent = sum(len(r["sentences"]) for r in rows)
    print(f"{len(rows)} texts, {n_sent} sentences; speed over {len(texts)} abstracts\n")
    print(table(results, cats, len(texts)))
    saved = {"texts": len(rows), "sentences": n_sent, "abstracts_timed": len(texts)}
    args.out.write_text(json.dumps({**saved, "results": results}, indent=2) + "\n")


def table(results: dict, cats: list[str], n: int) -> str:
    """A Markdown table: F1, precision, recall, speed, then texts wrong per category."""
    head = ["splitter", "F1", "P", "R", "texts wrong", f"ms / {n} abstracts", *cats]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in results.items():
        per = ["{}/{}".format(*r["wrong_by_category"].get(c, [0, 0])) for c in cats]
        cells = [f"{name} {r['version']}", f"{r['f1']:.3f}", f"{r['precision']:.3f}"]
        cells += [f"{r['recall']:.3f}", str(r["texts_wrong"]), f"{r['ms']:.0f}", *per]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
