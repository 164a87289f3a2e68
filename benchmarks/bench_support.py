"""The support check on claim sets: how many unsupported claims it flags, per kind, and its speed.

Each claim line (`id`, `gold`, `claim`, `supported`, `kind`) is checked against the text of the
corpus summary that `gold` identifies (its title and body, as the index holds them). Reported per
kind: the share flagged as unsupported. Speed: milliseconds per claim, median of several runs,
both with the passages' sentences already embedded (as in a conversation that keeps citing the
same passages) and with a fresh checker (every passage embedded on the way). Run from the
repository root:

    nice -n 10 .venv/bin/python benchmarks/bench_support.py [--sets FILE ...] [--runs 5]

`--sweep` prints the flag rates on the first set across thresholds (the tuning view), with every
score computed exactly (embeddings compared even where wording alone decides).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import emit  # noqa: E402
from chatbot import support  # noqa: E402
from chatbot.corpus import load_documents  # noqa: E402

SETS = [
    Path("/work/shared/eval/claims_dev.jsonl"),
    ROOT / "tests" / "data" / "claims_blind.jsonl",
]
RUNS = 5


def summaries() -> list[str]:
    """The corpus summaries, each as its title and body."""
    docs, _ = load_documents([ROOT / "corpus"])
    return [f"{d.title}\n\n{d.text}" for d in docs]


def load_claims(path: Path, texts: list[str]) -> list[dict]:
    """The claim lines of `path`, each with the `passage` its `gold` phrase identifies."""
    out = []
    for line in path.read_text("utf-8").splitlines():
        if not line.strip():
            continue
        claim = json.loads(line)
        found = [t for t in texts if claim["gold"] in t]
        if len(found) != 1:
            raise SystemExit(f"{path.name} {claim['id']}: gold phrase in {len(found)} summaries")
        out.append({**claim, "passage": found[0]})
    return out


def rates(claims: list[dict], scores: list[float], threshold: float) -> dict:
    """Share flagged as unsupported, per kind and over supported / unsupported claims."""
    groups: dict[str, list[bool]] = {}
    for claim, score in zip(claims, scores, strict=True):
        flagged = score < threshold
        side = "supported" if claim["supported"] else "unsupported"
        for key in (side, f"{side}:{claim['kind']}"):
            groups.setdefault(key, []).append(flagged)
    return {k: round(sum(v) / len(v), 3) for k, v in sorted(groups.items())}


def timed(claims: list[dict], warm: bool) -> float:
    """Milliseconds per claim for one pass, one claim per call (as answers are checked)."""
    checker = support.SupportChecker()
    checker.check("Warm the model up.", "The model loads its weights on first use.")
    if warm:
        for c in claims:
            checker.check(c["claim"], c["passage"])
    start = time.perf_counter()
    for c in claims:
        checker.check(c["claim"], c["passage"])
    return (time.perf_counter() - start) * 1000 / len(claims)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", type=Path, default=SETS)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/support.json")
    args = parser.parse_args()
    texts = summaries()
    checker = support.SupportChecker(exact=args.sweep)
    result: dict = {"threshold": support.THRESHOLD, "machine": platform.processor(), "sets": {}}
    for path in args.sets:
        claims = load_claims(path, texts)
        checked = checker.check_many([(c["claim"], [c["passage"]]) for c in claims])
        scores = [s.score for s in checked]
        if args.sweep and path == args.sets[0]:
            for t in [x / 100 for x in range(20, 81, 5)]:
                print(t, rates(claims, scores, t), file=sys.stderr)
            for c, s in zip(claims, scores, strict=True):
                mark = "XX" if (s >= support.THRESHOLD) != c["supported"] else "  "
                print(f"{mark} {s:.2f} {c['kind']:18} {c['claim']}", file=sys.stderr)
        entry = {"claims": len(claims), "flagged": rates(claims, scores, support.THRESHOLD)}
        entry["ms_per_claim_warm"] = round(
            statistics.median(timed(claims, True) for _ in range(args.runs)), 2
        )
        entry["ms_per_claim_cold"] = round(
            statistics.median(timed(claims, False) for _ in range(args.runs)), 2
        )
        result["sets"][path.name] = entry
    emit(result, args.out if not args.sweep else None)


if __name__ == "__main__":
    main()
