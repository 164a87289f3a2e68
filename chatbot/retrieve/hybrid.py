"""Hybrid retrieval: dense (Chroma) and BM25 scores normalised and combined; abstention; the
same search as a LangChain retriever."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from chatbot.errors import KeywordIndexError
from chatbot.index.bm25 import KeywordIndex
from chatbot.index.pdf import REFERENCES
from chatbot.index.store import Store
from chatbot.index.sync import source_counts
from chatbot.retrieve.facets import Facets, Narrowing, about, facets
from chatbot.retrieve.filters import check_k, check_where, explain_no_match
from chatbot.text.terms import terms
from chatbot.values import Passage

# The keyword side's share of the fused score. Equal weights, deliberately not tuned on any
# benchmark: docs/benchmarks.md shows the sweep (0.6 would be a little better on titles).
KEYWORD_WEIGHT = 0.5
COVERAGE_WEIGHT = 0.25
# What a passage of a PDF's reference list keeps of its fused score (see demote_references).
REFERENCES_WEIGHT = 0.7
# A word that the text of this many passages holds ("Data", "Fisher") is read as a surname only
# when the question says so plainly ("Fisher et al."), not after "by" ("by Fisher information").
COMMON_WORD_PASSAGES = 20
COMMON_WORD_SHARE = 0.002

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Retrieval:
    """Passages for a query, best first, and whether they are relevant enough to answer from."""

    query: str
    passages: list[Passage]
    dense_best: float
    coverage: float
    relevance: float
    relevant: bool
    # How the question narrowed the search, e.g. ("authors: Hu Ding", "year = 2021").
    narrowed: tuple[str, ...] = ()


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
        self._facets: tuple[str | None, Facets] = (None, Facets())
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
            try:
                index = KeywordIndex.load(self._keyword_dir, revision)
            except KeywordIndexError as e:
                # The store holds every passage: the keyword index can always be made again.
                log.warning("%s: rebuilding it from the store.", e)
                index = None
            if index is None:
                index = self.rebuild_keyword_index(revision)
            self._keyword = index
            return index

    def rebuild_keyword_index(self, revision: str | None = None) -> KeywordIndex:
        """Rebuild BM25 from the store's passages and save it."""
        revision = self.store.revision if revision is None else revision
        index = self.build_keyword_index(revision)
        try:
            index.save(self._keyword_dir)
        except OSError as e:
            # Searching works from memory; only the next process pays for the rebuild again.
            log.warning(
                "Cannot save the keyword index in %s (%s): it is rebuilt on each start until "
                "that folder is writable.",
                self._keyword_dir,
                e.strerror or e,
            )
        self._keyword = index
        return index

    def build_keyword_index(self, revision: str, **bm25: float) -> KeywordIndex:
        """BM25 over the store's passages in fields (`bm25` overrides k1 or b), not saved."""
        ids, texts, metas = self.store.all_passages()
        metas = [m or {} for m in metas]
        doc_ids = [str(m.get("doc_id", i)) for i, m in zip(ids, metas, strict=True)]
        fields = {
            "text": [f"{m.get('title', '')}\n{t}" for t, m in zip(texts, metas, strict=True)],
            "meta": [about(m) for m in metas],
        }
        found = facets(zip(doc_ids, metas))
        # Where each document came from, kept with the index: a damaged store cannot say.
        where = {d: m["source"] for d, m in zip(doc_ids, metas, strict=True) if m.get("source")}
        counts = source_counts(where.values())
        return KeywordIndex.build(ids, fields, revision, doc_ids, found, sources=counts, **bm25)

    def search(
        self, query: str, k: int | None = None, where: dict | None = None, *, narrow: bool = True
    ) -> Retrieval:
        """The `k` best passages for `query`: dense and BM25 results fused by `fuse`.

        With `narrow`, authors, a year or a venue the query names (and the collection holds)
        narrow the search as `where` would; when nothing is left, the search runs without them.
        """
        check_k(k)
        check_where(where)
        k = self.settings.top_k if k is None else k
        vector = self.store.embeddings.embed_query(query)
        if where is not None:
            where = self.facets().by_one_author(where)
        narrowing = self.narrowing(query) if narrow else None
        if narrowing is not None:
            found = self._search(query, vector, k, where, narrowing)
            if found.passages:
                return found
        return self._search(query, vector, k, where, None)

    def facets(self) -> Facets:
        """The collection's authors, years and venues, as its keyword index last saw them."""
        index = self.keyword_index()
        if self._facets[0] != index.revision:
            self._facets = (index.revision, Facets.from_json(index.facets))
        return self._facets[1]

    def narrowing(self, query: str) -> Narrowing | None:
        """The filter that authors, a year or a venue named in `query` imply, or None."""
        index = self.keyword_index()
        self.facets()
        # A word in the text of 1 passage in 500 (and at least 20) is a word, not just a name.
        limit = max(COMMON_WORD_PASSAGES, COMMON_WORD_SHARE * len(index.ids))
        return self._facets[1].narrowing(query, lambda w: index.passages_with(w) >= limit)

    def _search(
        self, query: str, vector, k: int, where: dict | None, narrowing: Narrowing | None
    ) -> Retrieval:
        depth = max(4 * k, 20)
        given = where
        if narrowing is not None:
            where = narrowing.where if where is None else {"$and": [where, narrowing.where]}
        # Ids and distances only: the text of the few passages kept is fetched after fusion.
        dense = self.store.nearest(vector, depth, where)
        docs = narrowing.doc_ids if narrowing else None
        # Each side also scores the other side's candidates (see `fuse`).
        keyword = self.keyword_index().search(query, depth, docs, also=[i for i, _ in dense])
        by_id: dict[str, Passage] = {}
        if given and keyword:
            allowed = self.store.get([i for i, _ in keyword], where=given)
            keyword = [(i, s) for i, s in keyword if i in allowed]
            by_id.update(allowed)
        dense_best = max((s for _, s in dense), default=0.0)
        seen = {i for i, _ in dense}
        dense = dense + self.store.similarities(vector, [i for i, _ in keyword if i not in seen])
        if given and not narrowing and not dense and not keyword:
            # A filter that matches nothing is most often a typo: say which field or kind is off.
            explain_no_match(given, self.store.collection.get(include=["metadatas"])["metadatas"])
        fused = fuse(dense, keyword)
        # Twice as many as kept: a reference list that loses its place makes room for the body.
        pool = sorted(fused, key=lambda pid: (-fused[pid], pid))[: 2 * k]
        missing = [pid for pid in pool if pid not in by_id]
        by_id.update(self.store.get(missing))
        fused = demote_references(fused, {pid: by_id[pid] for pid in pool if pid in by_id})
        top = sorted(pool, key=lambda pid: (-fused[pid], pid))[:k]
        passages = [replace(by_id[pid], score=round(fused[pid], 4)) for pid in top if pid in by_id]
        coverage = _coverage(query, passages[:3])
        score = relevance(dense_best, coverage)
        ok = bool(passages) and score >= self.settings.min_relevance
        if narrowing is not None and narrowing.by_author and not _topic(query, narrowing):
            # "What did Okonkwo and colleagues propose?" asks for that author's papers as such:
            # the filter found them, and no other term of the question is left to match.
            ok = bool(passages)
        said = narrowing.said if narrowing else ()
        return Retrieval(query, passages, dense_best, coverage, score, ok, said)


def demote_references(scores: dict[str, float], passages: dict[str, Passage]) -> dict[str, float]:
    """`scores` with those of passages from a paper's reference list scaled down.

    A reference list is dense with the titles of related work, so it matches a topic's words
    better than the paper's own text does: kept searchable, it comes first only when nothing
    in the body comes close.
    """
    return {
        pid: score * REFERENCES_WEIGHT
        if pid in passages and passages[pid].metadata.get("section") == REFERENCES
        else score
        for pid, score in scores.items()
    }


def fuse(
    dense: list[tuple[str, float]],
    keyword: list[tuple[str, float]],
    keyword_weight: float = KEYWORD_WEIGHT,
) -> dict[str, float]:
    """Fused scores in [0, 1]: a convex combination of each side's min-max normalised scores.

    `Retriever.search` has each side score the other side's candidates too, so a passage just
    below one side's cut keeps its own score there instead of that side's minimum (MRR@10 0.954
    against 0.943 on the research dev questions, 0.919 against 0.915 on the 5,365 ICML titles,
    docs/benchmarks.md). A passage one side did not score counts as that side's minimum.
    Unlike reciprocal-rank fusion this keeps how far ahead a side's best match is: a title that
    shares rare words with one abstract gives that abstract a BM25 score far above the rest, and
    ranks alone would throw that margin away.
    """
    fused: dict[str, float] = {}
    for weight, hits in ((1.0 - keyword_weight, dense), (keyword_weight, keyword)):
        if not hits:
            continue
        high = max(s for _, s in hits)
        low = min(s for _, s in hits)
        span = high - low
        for pid, s in hits:
            share = (s - low) / span if span > 0 else 1.0
            fused[pid] = fused.get(pid, 0.0) + weight * share
    return fused


def _topic(query: str, narrowing: Narrowing) -> set[str]:
    """The question's content terms that are not the names it narrowed the search by."""
    return set(terms(query)) - set(terms(" ".join(narrowing.named)))


def _coverage(query: str, passages: list[Passage]) -> float:
    """The largest share of the question's content terms that one of the passages contains."""
    wanted = set(terms(query))
    if not wanted:
        return 0.0
    return max(
        (
            len(wanted & set(terms(f"{p.title} {about(p.metadata)} {p.text}"))) / len(wanted)
            for p in passages
        ),
        default=0.0,
    )


class ChatbotRetriever(BaseRetriever):
    """The chatbot's hybrid search (dense + BM25, with `where`) as a LangChain retriever.

    `ChatbotRetriever(bot=Chatbot(), k=5, where={"year": 2023})` is a Runnable: `.invoke(query)`
    gives LangChain Documents, best first, each with the passage's metadata plus `doc_id`,
    `title`, `passage_id` and the fused `score`; it composes into a user's own chain with `|`.
    """

    # A `chatbot.Chatbot` (typed loosely: the facade sits above this module's layer).
    bot: Any
    k: int | None = None
    where: dict[str, Any] | None = None

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[LCDocument]:
        passages = self.bot.retrieve(query, k=self.k, where=self.where)
        return [
            LCDocument(
                page_content=p.text,
                id=p.passage_id,
                metadata={
                    **p.metadata,
                    "doc_id": p.doc_id,
                    "title": p.title,
                    "passage_id": p.passage_id,
                    "score": p.score,
                },
            )
            for p in passages
        ]
