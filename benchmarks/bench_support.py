"""The support check on claim sets: unsupported claims flagged, supported ones wrongly flagged.

Each claim (`id`, `gold` or `doc_id`, `claim`, `supported`, `kind`) is checked against the
document it is about: for the summaries, the one whose text holds its `gold` phrase; for the
abstracts, the record `doc_id` of ../shared/data/icml_2020_2023_abstracts.jsonl. Reported per set
and per kind, with the time a claim takes (median of `--runs` passes, sentence vectors cached as
they are for an answer). `--sweep` prints, over the tuning sets of both corpora, the flag rates
for each SIMILARITY_WEIGHT and THRESHOLD: how the two parameters were chosen.

    .venv/bin/python benchmarks/bench_support.py [--sweep] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import emit  # noqa: E402
from chatbot.index.documents import load_documents  # noqa: E402
from chatbot.index.embeddings.sentence_vectors import SentenceVectors  # noqa: E402
from chatbot.verify import support  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
SHARED = ROOT.parent / "shared"
TUNE = [
    SHARED / "eval" / "claims_dev.jsonl",
    DATA / "claims_summaries_tune.jsonl",
    DATA / "claims_abstracts_tune.jsonl",
]
HELD_OUT = [DATA / "claims_summaries_blind.jsonl", DATA / "claims_abstracts_blind.jsonl"]


def documents() -> tuple[list[str], dict[str, str]]:
    """The summaries' texts (title and body), and the abstracts by record id."""
    docs, _ = load_documents([ROOT / "corpus"])
    summaries = [f"{d.title}\n\n{d.text}" for d in docs]
    abstracts = {}
    path = SHARED / "data" / "icml_2020_2023_abstracts.jsonl"
    if path.exists():
        for line in path.read_text("utf-8").splitlines():
            r = json.loads(line)
            abstracts[r["id"]] = f"{r['title']}\n\n{r['abstract']}"
    return summaries, abstracts


def load_claims(path: Path, summaries: list[str], abstracts: dict[str, str]) -> list[dict]:
    """The claims of `path`, each with the `passage` it is checked against."""
    out = []
    for line in path.read_text("utf-8").splitlines():
        if not line.strip():
            continue
        c = json.loads(line)
        if "doc_id" in c:
            passage = abstracts[c["doc_id"]]
        else:
            found = [t for t in summaries if c["gold"] in t]
            if len(found) != 1:
                raise SystemExit(f"{path.name} {c['id']}: gold phrase in {len(found)} summaries")
            passage = found[0]
        out.append({**c, "passage": passage})
    return out


def rates(claims: list[dict], flagged: list[bool]) -> dict:
    """Share flagged as unsupported, over supported and unsupported claims and per kind."""
    groups: dict[str, list[bool]] = {}
    for c, f in zip(claims, flagged, strict=True):
        side = "supported" if c["supported"] else "unsupported"
        for key in (side, f"{side}:{c['kind']}"):
            groups.setdefault(key, []).append(f)
    return {k: round(sum(v) / len(v), 3) for k, v in sorted(groups.items())}


def sweep(sets: dict[str, list[dict]], vectors: SentenceVectors) -> None:
    """Flag rates on the tuning sets for a grid of both parameters."""
    for weight in (0.4, 0.5, 0.6, 0.7, 0.8):
        support.SIMILARITY_WEIGHT = weight
        backs = {
            name: [support.backing(c["claim"], c["passage"], vectors) for c in claims]
            for name, claims in sets.items()
        }
        for threshold in [x / 100 for x in range(50, 81, 2)]:
            cells = []
            for name, claims in sets.items():
                flagged = [b.vetoed or b.score < threshold for b in backs[name]]
                r = rates(claims, flagged)
                cells.append(f"{name[:22]:>22} {r['unsupported']:.2f}/{r['supported']:.2f}")
            print(f"w={weight} t={threshold:.2f} " + " ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", type=Path, default=TUNE + HELD_OUT)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/support.json")
    args = ap.parse_args()
    summaries, abstracts = documents()
    vectors = SentenceVectors()
    sets = {p.name: load_claims(p, summaries, abstracts) for p in args.sets if p.exists()}
    if args.sweep:
        sweep({n: c for n, c in sets.items() if "blind" not in n}, vectors)
        return
    result: dict = {"threshold": support.THRESHOLD, "weight": support.SIMILARITY_WEIGHT, "sets": {}}
    for name, claims in sets.items():
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            checked = [support.check_claim(c["claim"], c["passage"], vectors) for c in claims]
            times.append((time.perf_counter() - start) * 1000 / len(claims))
        result["sets"][name] = {
            "claims": len(claims),
            "flagged": rates(claims, [not s.supported for s in checked]),
            "ms_per_claim": round(statistics.median(times), 2),
        }
    emit(result, args.out)


if __name__ == "__main__":
    main()
