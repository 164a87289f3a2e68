"""Choose the offline model's parameters on tuning questions of both corpora, and report them.

For every question: retrieve as `ask` does, score every passage sentence with the offline model,
and keep the best score, whether the best sentence's document is a right one, and whether the
question names something no passage holds. Then, for each COVERAGE_WEIGHT, sweep MIN_SCORE and
print per set: unanswerable questions abstaining, answerable ones answered (and citing a right
document). Run it on tuning sets to choose, then once on held-out sets to report.

    python benchmarks/tune_offline.py --summaries DIR --abstracts DIR \\
        --sets ../shared/eval/dev_hard.jsonl benchmarks/data/research_dev.jsonl ...
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from chatbot import Chatbot, Settings
from chatbot.answer.models import offline
from chatbot.answer.models.boundary import AnswerRequest, CondenseRequest
from chatbot.answer.pipeline import retrieve
from chatbot.text.terms import terms

WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
FLOORS = np.round(np.arange(0.30, 0.80, 0.02), 2)


def load(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]


def measure(bot: Chatbot, q: dict, texts: dict[str, str]) -> dict:
    """The best score per COVERAGE_WEIGHT, and whether the best sentence cites a right doc."""
    turns = q.get("turns") or [q["question"]]
    history: list[dict] = []
    for turn in turns[:-1]:
        answer = bot.ask(turn, history)
        history += [
            {"role": "user", "content": turn},
            {"role": "assistant", "content": answer.text},
        ]
    question = turns[-1]
    standalone = question
    if history:
        standalone = bot.model.condense(CondenseRequest(question, tuple(history))).question
    found = retrieve(bot.retriever, standalone, None, None, bot.settings.top_k)
    request = AnswerRequest(question, standalone, tuple(history), tuple(found.passages))
    missing = bool(offline.missing_names(question, found.passages))
    known = set()
    for p in found.passages:
        known |= set(terms(p.text)) | offline._meta_terms(p)
    wanted = set(terms(question))
    uncovered = len(wanted - known) / len(wanted) if wanted else 0.0
    out = {
        "missing": missing,
        "relevance": found.relevance,
        "uncovered": uncovered,
        "figure": offline.ask_figure(question),
        "by_weight": {},
        "numbered": {},
    }
    offline.FORM_PENALTY = 0.0

    def right(c) -> bool:
        doc = found.passages[c.n - 1].doc_id
        if "doc_id" in q:
            return doc == q["doc_id"]
        return any(g in texts.get(doc, "") for g in q.get("gold", []))

    for w in WEIGHTS:
        offline.COVERAGE_WEIGHT = w
        ranked = sorted(bot.model.candidates(request), key=lambda c: -c.score)
        numbered = [c for c in ranked if any(ch.isdigit() for ch in c.text)]
        out["by_weight"][w] = (ranked[0].score, right(ranked[0])) if ranked else (0.0, False)
        out["numbered"][w] = (numbered[0].score, right(numbered[0])) if numbered else (0.0, False)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--summaries", type=Path, required=True, help="data dir of the summaries")
    ap.add_argument("--abstracts", type=Path, help="data dir holding the `abstracts` collection")
    ap.add_argument("--sets", type=Path, nargs="+", required=True)
    ap.add_argument("--limit", type=int, default=0, help="at most this many questions a set")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/offline-tuning.json"))
    args = ap.parse_args()
    bots = {"summaries": Chatbot(Settings.load(env_file=None, data_dir=args.summaries))}
    if args.abstracts:
        bots["abstracts"] = Chatbot(
            Settings.load(env_file=None, data_dir=args.abstracts, collection="abstracts")
        )
    results = {}
    for path in args.sets:
        rows = load(path)[: args.limit or None]
        bot = bots["abstracts" if "doc_id" in rows[0] else "summaries"]
        texts = {d.doc_id: d.text for d in bot.documents()} if "doc_id" not in rows[0] else {}
        results[path.name] = [
            {"id": q["id"], "type": q.get("type", "single"), **measure(bot, q, texts)} for q in rows
        ]
        print(f"measured {path.name}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
