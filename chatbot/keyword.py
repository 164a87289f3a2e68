"""The keyword side of retrieval: BM25 (bm25s) over stemmed terms, persisted beside the store."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*|\d+(?:\.\d+)?")
# A short English stop list plus question words, which say nothing about the topic.
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in into is
    it its itself just let me more most my myself no nor not now of off on once only or other our
    ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    s t don doesn didn isn wasn weren won tell describe explain mention mentions mentioned say says
    said give please paper papers summary summaries article authors author corpus deal deals
    involve involves discuss discusses address addresses concern concerns focus focuses talk
    talks propose proposes proposed present presents introduce introduces new novel""".split()
)


# "Which papers…", "List the summaries that…": the question wants every relevant source.
_LISTING = re.compile(
    r"^\s*(which|what|list|name|find)\b.*\b(papers|summaries|works|studies|articles|ones)\b",
    re.IGNORECASE,
)


def asks_for_list(question: str) -> bool:
    """True for questions that ask which works (plural) are about something."""
    return bool(_LISTING.search(question))


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")


def terms(text: str) -> list[str]:
    """Lowercased, stemmed content words of `text`, stop words removed."""
    words = [w.lower() for w in _WORD.findall(text)]
    words = [w for w in words if w not in STOPWORDS]
    return _stemmer().stemWords(words) if words else []


class KeywordIndex:
    """BM25 over passage ids; tagged with the store revision it was built from."""

    def __init__(self, retriever, ids: list[str], revision: str) -> None:
        self._retriever = retriever
        self.ids = ids
        self.revision = revision

    @classmethod
    def build(cls, ids: Sequence[str], texts: Sequence[str], revision: str) -> KeywordIndex:
        """Index `texts` (already including whatever should be searchable, e.g. titles)."""
        import bm25s

        retriever = bm25s.BM25()
        tokens = [terms(t) or ["\x00empty"] for t in texts]
        if tokens:
            retriever.index(tokens, show_progress=False)
        return cls(retriever, list(ids), revision)

    def save(self, folder: Path) -> None:
        """Write atomically: a half-written index must never be loaded."""
        tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        if self.ids:
            self._retriever.save(str(tmp), show_progress=False)
        (tmp / "ids.json").write_text(json.dumps({"revision": self.revision, "ids": self.ids}))
        old = folder.with_name(folder.name + f".old{os.getpid()}")
        if folder.exists():
            folder.rename(old)
        tmp.rename(folder)
        shutil.rmtree(old, ignore_errors=True)

    @classmethod
    def load(cls, folder: Path, revision: str) -> KeywordIndex | None:
        """The saved index if it matches `revision`, else None (the caller rebuilds it)."""
        import bm25s

        try:
            meta = json.loads((folder / "ids.json").read_text())
        except (OSError, ValueError):
            return None
        if meta.get("revision") != revision:
            return None
        retriever = bm25s.BM25.load(str(folder), show_progress=False) if meta["ids"] else None
        return cls(retriever, meta["ids"], revision)

    def search(self, query: str, n: int) -> list[tuple[str, float]]:
        """Up to `n` (passage id, BM25 score) pairs with a positive score, best first."""
        q = terms(query)
        if not q or not self.ids:
            return []
        docs, scores = self._retriever.retrieve([q], k=min(n, len(self.ids)), show_progress=False)
        return [(self.ids[d], float(s)) for d, s in zip(docs[0], scores[0]) if s > 0]
