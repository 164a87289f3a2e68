"""Ways to raise retrieval quality on written questions, each measured against the hybrid as is.

Run from the repository root on a data directory built by bench_collections.py (results and the
exact commands are in docs/benchmarks.md):

    nice -n 10 .venv/bin/python benchmarks/bench_retrieval_variants.py \
        /tmp/icml-bench/icml-5365-titled benchmarks/data/research_dev.jsonl

The variants re-rank exact scores held in memory: the cosine of the question to every stored
passage vector and BM25 (bm25s, the keyword index's stemming) over every passage's title and
text, fused as `Retriever.search` fuses them (each side's 4k best passages pooled, both sides
scoring the pool, min-max normalised, keyword weight 0.5, k = 30 passages ranked by document).
Each variant changes one thing: BM25's k1 and b, a separately weighted title field (BM25F-like),
the normalisation, the pool's depth, the keyword weight, scoring a document by more than its best
passage or BM25 by its whole document, a floor on the terms' document frequency, and
pseudo-relevance feedback on either side.
A file of records asks every third title.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_collections import COLLECTION, PASSAGES
from common import emit

from chatbot import Chatbot, Settings
from chatbot.index.bm25 import K1, B
from chatbot.text.terms import terms


def bm25(texts: list[str], k1: float = K1, b: float = B):
    """A bm25s index of `texts` with the keyword index's terms."""
    import bm25s

    index = bm25s.BM25(k1=k1, b=b)
    index.index([terms(t) or ["\x00empty"] for t in texts], show_progress=False)
    return index


def minmax(x: np.ndarray) -> np.ndarray:
    low, high = x.min(), x.max()
    return (x - low) / (high - low) if high > low else np.ones_like(x)


def zscore(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / (x.std() + 1e-9)


def pooled(dense, keyword, weight=0.5, depth=4 * PASSAGES, norm=minmax):
    """Each side's `depth` best passages pooled, and their fused scores, as `Retriever.search`."""
    pool = np.argpartition(-dense, depth)[:depth]
    best = np.argpartition(-keyword, depth)[:depth]
    pool = np.union1d(pool, best[keyword[best] > 0])
    return pool, (1 - weight) * norm(dense[pool]) + weight * norm(keyword[pool])


def fused(dense, keyword, weight=0.5, depth=4 * PASSAGES, norm=minmax) -> np.ndarray:
    """Passage rows, best first, as `Retriever.search` fuses both sides over their pooled best."""
    pool, score = pooled(dense, keyword, weight, depth, norm)
    return pool[np.argsort(-score, kind="stable")[:PASSAGES]]


class Corpus:
    """Every passage's vector, text and document, and BM25 over them."""

    def __init__(self, bot: Chatbot) -> None:
        got = bot.store.collection.get(include=["embeddings", "documents", "metadatas"])
        self.vectors = np.asarray(got["embeddings"], dtype=np.float32)
        self.vectors /= np.linalg.norm(self.vectors, axis=1, keepdims=True)
        self.doc_of = [m["doc_id"] for m in got["metadatas"]]
        self.titles = [m.get("title", "") for m in got["metadatas"]]
        texts = [f"{t}\n{x}" for t, x in zip(self.titles, got["documents"], strict=True)]
        self.tokens = [terms(t) for t in texts]
        self.df = Counter(t for passage in self.tokens for t in set(passage))
        self.index = {(K1, B): bm25(texts)}
        for k1, b in ((1.5, 0.75), (1.2, 0.75), (1.2, 0.5), (0.6, 0.4), (0.9, 0.3), (0.9, 0.5)):
            self.index[(k1, b)] = bm25(texts, k1, b)
        self.title_index = bm25(self.titles) if any(self.titles) else None
        whole: dict[str, list[str]] = {}
        for doc, text in zip(self.doc_of, got["documents"], strict=True):
            whole.setdefault(doc, []).append(text)
        # Each passage indexed with its whole document's text (title and every passage).
        self.doc_index = bm25(
            [f"{t}\n{' '.join(whole[d])}" for t, d in zip(self.titles, self.doc_of, strict=True)]
        )
        self.queries: dict[str, np.ndarray] = {}  # question -> its unit vector

    def mrr(self, rows, gold: str) -> float:
        docs = list(dict.fromkeys(self.doc_of[i] for i in rows))[:10]
        return 1.0 / (docs.index(gold) + 1) if gold in docs else 0.0


def variants(c: Corpus) -> dict[str, Callable[[str, np.ndarray], np.ndarray]]:
    """Each variant: (question, exact dense scores) to passage rows, best first."""

    def kw(q: str, key=(K1, B), words=None) -> np.ndarray:
        words = terms(q) if words is None else words
        return c.index[key].get_scores(words) if words else np.zeros(len(c.doc_of))

    def prf_dense(q, dense, beta=0.5, m=3):
        top = fused(dense, kw(q))[:m]
        vector = c.queries[q] + beta * c.vectors[top].mean(axis=0)
        return fused(c.vectors @ (vector / np.linalg.norm(vector)), kw(q))

    def prf_keyword(q, dense, n=5, weight=0.2, m=3):
        words = terms(q)
        gain = Counter()
        for i in fused(dense, kw(q))[:m]:
            for t in set(c.tokens[i]) - set(words):
                gain[t] += np.log(len(c.tokens) / c.df[t])
        extra = [t for t, _ in gain.most_common(n)]
        return fused(dense, kw(q) + weight * kw(q, words=extra))

    def by_document(q, dense, share=0.1):
        # A document scores its best passage plus `share` of its other pooled passages' scores.
        pool, score = pooled(dense, kw(q))
        best: dict[str, tuple[float, int]] = {}
        rest: Counter = Counter()
        for i, s in sorted(zip(pool, score, strict=True), key=lambda p: -p[1]):
            doc = c.doc_of[i]
            if doc in best:
                rest[doc] += s
            else:
                best[doc] = (s, i)
        order = sorted(best, key=lambda d: -(best[d][0] + share * rest[d]))
        return np.array([best[d][1] for d in order[:PASSAGES]])

    def floor(q, dense, share=0.2):
        words = [t for t in terms(q) if c.df.get(t, 0) < share * len(c.tokens)]
        return fused(dense, kw(q, words=words))

    out: dict[str, Callable] = {
        "bm25 alone": lambda q, d: np.argsort(-kw(q))[:PASSAGES],
        "dense alone": lambda q, d: np.argsort(-d)[:PASSAGES],
        f"hybrid, bm25 k1 {K1} b {B} (the keyword index)": lambda q, d: fused(d, kw(q)),
    }
    for key in c.index:
        if key != (K1, B):
            name = f"hybrid, bm25 k1 {key[0]} b {key[1]}"
            out[name] = lambda q, d, key=key: fused(d, kw(q, key))
    if c.title_index is not None:
        for a in (0.2, 0.5):
            name = f"title field weighted +{a} (BM25F-like)"
            out[name] = lambda q, d, a=a: fused(d, kw(q) + a * c.title_index.get_scores(terms(q)))
    out["z-scores instead of min-max"] = lambda q, d: fused(d, kw(q), norm=zscore)
    out["pool of 10k passages a side"] = lambda q, d: fused(d, kw(q), depth=10 * PASSAGES)
    for w in (0.4, 0.6):
        out[f"keyword weight {w}"] = lambda q, d, w=w: fused(d, kw(q), w)
    out["document: best passage + 0.1 x its others"] = by_document
    out["bm25 over the whole document, not the passage"] = lambda q, d: fused(
        d, c.doc_index.get_scores(terms(q))
    )
    out["terms in over 20% of passages dropped"] = floor
    out["dense feedback: + 0.5 x mean of the 3 best"] = prf_dense
    out["keyword feedback: 5 best terms of the 3 best, weight 0.2"] = prf_keyword
    return out


def run_file(bot: Chatbot, corpus: Corpus, path: Path) -> dict:
    """MRR@10 of every variant on one question file, with the time each takes per question."""
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    if rows and "question" not in rows[0]:
        rows = [{"question": r["title"], "doc_id": r["id"]} for r in rows][::3]
    queries = [r["question"] for r in rows]
    vectors = np.asarray(bot.store.cache.embed(queries), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    corpus.queries.update(zip(queries, vectors, strict=True))
    dense = [corpus.vectors @ v for v in vectors]
    out: dict = {"questions": len(rows)}
    for name, rank in variants(corpus).items():
        started = time.perf_counter()
        ranked = [rank(q, d) for q, d in zip(queries, dense, strict=True)]
        ms = 1e3 * (time.perf_counter() - started) / len(rows)
        mrr = np.mean([corpus.mrr(r, row["doc_id"]) for r, row in zip(ranked, rows, strict=True)])
        out[name] = {"mrr@10": round(float(mrr), 4), "ms_per_query": round(ms, 2)}
        print(f"{path.name:24} {name:58} {out[name]}", flush=True)
    return out


def main() -> None:
    """Print (and save) every variant's MRR@10 on every question file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    settings = Settings.load(
        env_file=None, data_dir=args.data_dir, collection=COLLECTION, model="offline"
    )
    bot = Chatbot(settings)
    corpus = Corpus(bot)
    result = {"data_dir": str(args.data_dir), "passages": len(corpus.doc_of), "files": {}}
    for path in args.files:
        result["files"][path.name] = run_file(bot, corpus, path)
    emit(result, args.out)


if __name__ == "__main__":
    main()
