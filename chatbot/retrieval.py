"""Hybrid retrieval: dense (Chroma) and BM25 fused by reciprocal rank, and the abstention rule."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

from .corpus import Passage
from .keyword import KeywordIndex, terms
from .store import Store

RRF_K = 60
COVERAGE_WEIGHT = 0.25


@dataclass(frozen=True)
class Retrieval:
    """Passages for a query, best first, and whether they are relevant enough to answer from."""

    query: str
    passages: list[Passage]
    dense_best: float
    coverage: float
    relevance: float
    relevant: bool


def relevance(dense_best: float, coverage: float) -> float:
    """How well the best evidence matches the question; below CHATBOT_MIN_RELEVANCE we abstain.

    Dense similarity alone confuses "on a related theme" with "about this"; keyword coverage alone
    is fooled by common words. Their sum separates questions the corpus answers from off-topic
    ones better than either (see benchmarks/calibrate_abstention.py, run on held-out questions).
    """
    return dense_best + COVERAGE_WEIGHT * coverage


class Retriever:
    """Searches one store; keeps its keyword index in step with the store's revision."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.settings = store.settings
        self._keyword: KeywordIndex | None = None
        self._lock = threading.Lock()

    @property
    def _keyword_dir(self):
        return self.settings.data_dir / "bm25" / self.settings.collection

    def keyword_index(self) -> KeywordIndex:
        """The BM25 index for the store's current revision, loaded or rebuilt as needed."""
        revision = self.store.revision
        with self._lock:
            if self._keyword is not None and self._keyword.revision == revision:
                return self._keyword
            index = KeywordIndex.load(self._keyword_dir, revision)
            if index is None:
                index = self.rebuild_keyword_index(revision)
            self._keyword = index
            return index

    def rebuild_keyword_index(self, revision: str | None = None) -> KeywordIndex:
        """Rebuild BM25 from the store's passages and save it."""
        revision = self.store.revision if revision is None else revision
        ids, texts, metas = self.store.all_passages()
        searchable = [f"{(m or {}).get('title', '')}\n{t}" for t, m in zip(texts, metas)]
        index = KeywordIndex.build(ids, searchable, revision)
        index.save(self._keyword_dir)
        self._keyword = index
        return index

    def search(self, query: str, k: int | None = None, where: dict | None = None) -> Retrieval:
        """The `k` best passages for `query` by reciprocal-rank fusion of dense and BM25 results."""
        k = k or self.settings.top_k
        depth = max(4 * k, 20)
        vector = self.store.embeddings.embed_query(query)
        # Ids and distances only: the text of the few passages kept is fetched after fusion.
        dense = self.store.nearest(vector, depth, where)
        keyword = self.keyword_index().search(query, depth)
        by_id: dict[str, Passage] = {}
        if where and keyword:
            allowed = self.store.get([i for i, _ in keyword], where=where)
            keyword = [(i, s) for i, s in keyword if i in allowed]
            by_id.update(allowed)
        fused: dict[str, float] = {}
        for ranking in ([i for i, _ in dense], [i for i, _ in keyword]):
            for rank, pid in enumerate(ranking):
                fused[pid] = fused.get(pid, 0.0) + 1.0 / (RRF_K + rank + 1)
        top = sorted(fused, key=lambda pid: (-fused[pid], pid))[:k]
        missing = [pid for pid in top if pid not in by_id]
        by_id.update(self.store.get(missing))
        best = 2.0 / (RRF_K + 1)  # first in both rankings
        passages = [
            replace(by_id[pid], score=round(fused[pid] / best, 4)) for pid in top if pid in by_id
        ]
        dense_best = max((s for _, s in dense), default=0.0)
        coverage = _coverage(query, passages[:3])
        score = relevance(dense_best, coverage)
        ok = bool(passages) and score >= self.settings.min_relevance
        return Retrieval(query, passages, dense_best, coverage, score, ok)


def _coverage(query: str, passages: list[Passage]) -> float:
    """The largest share of the question's content terms that one of the passages contains."""
    wanted = set(terms(query))
    if not wanted:
        return 0.0
    return max(
        (len(wanted & set(terms(f"{p.title} {p.text}"))) / len(wanted) for p in passages),
        default=0.0,
    )
