"""Retrieval quality on written questions: research questions and questions that name authors.

Run from the repository root on a data directory built by bench_collections.py (results and exact
commands are in docs/benchmarks.md):

    nice -n 10 .venv/bin/python benchmarks/bench_questions.py /tmp/icml-bench/icml-5365-titled \
        benchmarks/data/research_dev.jsonl benchmarks/data/authors_dev.jsonl

Each line of a question file has `question` and the `doc_id` of the one record that answers it.
Rankings are by document (its best passage) from the 30 best passages, as in bench_collections.py;
MRR is cut at rank 10. Methods: BM25 alone (the keyword index as `ask` uses it, authors field
included), dense alone, the hybrid `Retriever.search` that `ask` uses (question narrowing
included), the hybrid without narrowing, the hybrid with bm25s' default BM25 parameters (k1 1.5,
b 0.75) instead of the keyword index's K1 and B, and the hybrid as it was before authors were
indexed (the text field only, each side scoring only its own candidates, no narrowing, bm25s'
defaults), all in one run.
A file of records instead of questions (e.g. the abstracts file) asks each record's title.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_collections import COLLECTION, PASSAGES, _docs, _Lookup, _scores
from common import emit

from chatbot import Chatbot, Settings
from chatbot.index.bm25 import FIELD_WEIGHTS, K1, B
from chatbot.retrieve.hybrid import fuse


def load(path: Path) -> list[dict]:
    """The questions of a JSON Lines file; a file of records gives its titles (title → abstract)."""
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    if rows and "question" not in rows[0]:
        return [{"question": r["title"], "doc_id": r["id"]} for r in rows]
    return rows


def methods(bot: Chatbot, doc_of: dict[str, str]) -> dict[str, Callable[[str], list[str]]]:
    """Each method: a question to its ranking of documents."""
    store, retriever = bot.store, bot.retriever
    index = retriever.keyword_index()
    # bm25s' own parameters, which the keyword index used before K1 and B were chosen.
    default = retriever.build_keyword_index(index.revision, k1=1.5, b=0.75)
    vectors: dict[str, list[float]] = {}

    def vector(q: str) -> list[float]:
        if q not in vectors:
            vectors[q] = store.embeddings.embed_query(q)
        return vectors[q]

    def dense(q: str) -> list[str]:
        return _docs([i for i, _ in store.nearest(vector(q), PASSAGES)], doc_of)

    def before(q: str) -> list[str]:
        # The hybrid without what this benchmark measures: the text field only, each side's own
        # candidates (the other side's count as its minimum), no narrowing.
        depth = max(4 * PASSAGES, 20)
        hits = default.search(q, depth, weights={"text": 1.0})
        fused = fuse(store.nearest(vector(q), depth), hits)
        return _docs(sorted(fused, key=lambda pid: (-fused[pid], pid))[:PASSAGES], doc_of)

    def hybrid(narrow: bool, keyword=None) -> Callable[[str], list[str]]:
        def run(q: str) -> list[str]:
            if keyword is None:
                found = retriever.search(q, PASSAGES, narrow=narrow)
            else:
                # The same search over a keyword index with other BM25 parameters.
                retriever._keyword = keyword
                try:
                    found = retriever.search(q, PASSAGES, narrow=narrow)
                finally:
                    retriever._keyword = index
            return _docs([p.passage_id for p in found.passages], doc_of)

        return run

    return {
        "bm25 (text field only)": lambda q: _docs(
            [i for i, _ in index.search(q, PASSAGES, weights={"text": 1.0})], doc_of
        ),
        "bm25 (text + authors fields)": lambda q: _docs(
            [i for i, _ in index.search(q, PASSAGES)], doc_of
        ),
        "bm25 (text + authors fields, k1 1.5, b 0.75)": lambda q: _docs(
            [i for i, _ in default.search(q, PASSAGES)], doc_of
        ),
        "dense": dense,
        "hybrid before (one-sided scores, text field, no narrowing)": before,
        "hybrid, no narrowing": hybrid(False),
        "hybrid (what ask uses), bm25 k1 1.5, b 0.75": hybrid(True, default),
        "hybrid (what ask uses)": hybrid(True),
    }


def run_file(
    bot: Chatbot, path: Path, doc_of: dict[str, str], sample: int = 0, asks: int = 0
) -> dict:
    """Recall@1, Recall@10, MRR@10 of every method on one question file."""
    questions = load(path)
    if sample and len(questions) > sample:
        questions = random.Random(0).sample(questions, sample)
    bot.store.embeddings = _Lookup(bot.store.embeddings, {})
    texts_all = [q["question"] for q in questions]
    bot.store.embeddings.vectors = dict(
        zip(texts_all, bot.store.cache.embed(texts_all), strict=True)
    )
    texts = [q["question"] for q in questions]
    gold = [q["doc_id"] for q in questions]
    out: dict = {"questions": len(questions)}
    for name, search in methods(bot, doc_of).items():
        started = time.perf_counter()
        rankings = [search(t) for t in texts]
        row = {k: round(v, 4) for k, v in _scores(rankings, gold).items()}
        row["ms_per_query"] = round(1e3 * (time.perf_counter() - started) / len(texts), 1)
        out[name] = row
        print(f"{path.name:24} {name:58} {row}", flush=True)
    if asks:
        out["ask"] = ask(bot, questions[:asks])
        print(f"{path.name:24} {'ask (offline model)':58} {out['ask']}", flush=True)
    bot.store.embeddings = bot.store.embeddings.inner
    return out


def ask(bot: Chatbot, questions: list[dict]) -> dict:
    """What `ask` answers: how often it cites the right record, and how often it abstains."""
    cited = abstained = 0
    for q in questions:
        answer = bot.ask(q["question"])
        abstained += answer.abstained
        cited += q["doc_id"] in {c.doc_id for c in answer.citations}
    n = len(questions)
    return {"questions": n, "cites_gold": round(cited / n, 4), "abstains": round(abstained / n, 4)}


def main() -> None:
    """Print (and save) the scores of every method on every question file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--sample", type=int, default=0, help="questions per file (0: all)")
    parser.add_argument("--asks", type=int, default=0, help="questions per file also asked")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    settings = Settings.load(
        env_file=None, data_dir=args.data_dir, collection=COLLECTION, model="offline"
    )
    bot = Chatbot(settings)
    ids, _, metas = bot.store.all_passages()
    doc_of = {i: m["doc_id"] for i, m in zip(ids, metas, strict=True)}
    bot.retriever.search("warm up the model and the keyword index")
    result: dict = {
        "data_dir": str(args.data_dir),
        "passages": len(ids),
        "field_weights": FIELD_WEIGHTS,
        "bm25": {"k1": K1, "b": B},
        "files": {},
    }
    for path in args.files:
        result["files"][path.name] = run_file(bot, path, doc_of, args.sample, args.asks)
    emit(result, args.out)


if __name__ == "__main__":
    main()
