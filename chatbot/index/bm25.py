"""The keyword side of retrieval: BM25 (bm25s) over stemmed terms, persisted beside the store.

Each passage is indexed in fields: its text (with its document's title), and its document's
authors, venue and year. One BM25 index holds them all, each field's terms tagged with its name
("meta:ding"), so each field has its own document frequencies; a passage's score is the weighted
sum of what the question's terms score in each field. An author's name counts without being
written into the text the model is shown, and a name counts only where names are.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from chatbot.errors import KeywordIndexError
from chatbot.text.terms import terms

# How much a match in each field counts. "text" is the document's title and the passage; "meta"
# its authors, venue and year. A document without them scores as it would without the field.
FIELD_WEIGHTS = {"text": 1.0, "meta": 1.0}
# BM25's term-frequency saturation and length normalisation: Anserini's defaults for passages
# rather than bm25s' (1.5, 0.75). A question paraphrases an abstract that repeats its own terms,
# so the third "kernel" should add little; MRR@10 on written research questions with titles
# indexed 0.953 against 0.934, on 5,365 titles 0.927 against 0.919 (docs/benchmarks.md).
K1, B = 0.9, 0.4
# Bumped whenever what is indexed changes: an index saved in another format is rebuilt.
FORMAT = 4


class KeywordIndex:
    """BM25 over passage ids, in fields; tagged with the store revision it was built from.

    It also keeps each passage's document id and the collection's facets (authors, years, venues
    with their documents, as `query.facets` gives them), so a question can be narrowed to them;
    and how many documents come from each folder, which a damaged store can no longer say.
    """

    def __init__(
        self,
        retriever,
        ids: list[str],
        revision: str,
        doc_ids: list[str] | None = None,
        facets: dict[str, Any] | None = None,
        sources: dict[str, int] | None = None,
    ) -> None:
        self._retriever = retriever
        self.sources = sources or {}
        self.ids = ids
        self.revision = revision
        self.doc_ids = doc_ids if doc_ids is not None else list(ids)
        self.facets = facets or {}
        self._docs = None  # doc_ids as an array, made on the first narrowed search
        self._position: dict[str, int] | None = None  # passage id -> row, made when first needed

    @classmethod
    def build(
        cls,
        ids: Sequence[str],
        fields: Mapping[str, Sequence[str]],
        revision: str,
        doc_ids: Sequence[str] | None = None,
        facets: dict[str, Any] | None = None,
        k1: float = K1,
        b: float = B,
        sources: dict[str, int] | None = None,
    ) -> KeywordIndex:
        """Index each field's texts (one per passage, in the order of `ids`; "" for none)."""
        import bm25s

        tokens: list[list[str]] = [[] for _ in ids]
        for name, texts in fields.items():
            tag = _tag(name)
            for passage, text in zip(tokens, texts, strict=True):
                passage += [tag + t for t in terms(text)]
        retriever = bm25s.BM25(k1=k1, b=b)
        if tokens:
            retriever.index([t or ["\x00empty"] for t in tokens], show_progress=False)
        return cls(retriever, list(ids), revision, list(doc_ids or ids), facets, sources)

    def save(self, folder: Path) -> None:
        """Publish the index in `folder` atomically, also against other processes saving it.

        The arrays go to a fresh sub-folder; then `ids.json`, which names that sub-folder, is
        replaced in one step. A reader sees the old index or the new one, never half of each.
        """
        folder.mkdir(parents=True, exist_ok=True)
        name = uuid.uuid4().hex
        work = folder / f"{_TMP}{name}"
        work.mkdir()
        if self.ids:
            self._retriever.save(str(work), show_progress=False)
        work.rename(folder / name)
        meta = {
            "format": FORMAT,
            "revision": self.revision,
            "ids": self.ids,
            "dir": name,
            "doc_ids": self.doc_ids,
            "facets": self.facets,
            "sources": self.sources,
        }
        pointer = folder / f"{_TMP}{name}.json"
        pointer.write_text(json.dumps(meta))
        os.replace(pointer, folder / IDS)
        _prune(folder, keep=name)

    @classmethod
    def load(cls, folder: Path, revision: str) -> KeywordIndex | None:
        """The saved index if it has `revision` and FORMAT; None if there is none or it is stale.

        Raises KeywordIndexError when the saved index cannot be read (the caller rebuilds it).
        """
        for _ in range(3):
            meta = _read_ids(folder)
            if meta is None or meta.get("revision") != revision or meta.get("format") != FORMAT:
                return None
            try:
                retriever = _load_bm25(folder / meta.get("dir", ""), meta)
                docs = meta.get("doc_ids")
                if not isinstance(docs, list) or len(docs) != len(meta["ids"]):
                    raise ValueError("its document ids do not match its passage ids")
                facets, sources = meta.get("facets") or {}, meta.get("sources") or {}
                return cls(retriever, meta["ids"], revision, docs, facets, sources)
            except Exception as e:
                # Another process may have published a newer index and pruned this one.
                if _read_ids(folder) != meta:
                    continue
                raise KeywordIndexError(f"The keyword index in {folder} is damaged ({e})") from e
        return None

    def search(
        self,
        query: str,
        n: int,
        docs: Collection[str] | None = None,
        weights: Mapping[str, float] | None = None,
        also: Collection[str] = (),
    ) -> list[tuple[str, float]]:
        """Up to `n` (passage id, score) pairs with a positive score, best first.

        A score is the FIELD_WEIGHTS-weighted sum of the fields' BM25 scores (`weights` overrides
        them); with `docs`, only passages of those documents are scored. The passages of `also`
        that are not among the `n` follow them with their scores, 0 included.
        """
        import numpy as np

        q = terms(query)
        if not q or not self.ids or n <= 0:
            return []
        weights = FIELD_WEIGHTS if weights is None else weights
        scores = np.zeros(len(self.ids), dtype=np.float32)
        for name, weight in weights.items():
            if weight:
                tag = _tag(name)
                scores += weight * self._retriever.get_scores([tag + t for t in q])
        if docs is not None:
            if self._docs is None:
                self._docs = np.asarray(self.doc_ids, dtype=object)
            scores[~np.isin(self._docs, list(docs))] = 0.0
        n = min(n, len(self.ids))
        top = np.argpartition(-scores, n - 1)[:n]
        top = [int(i) for i in top[np.argsort(-scores[top], kind="stable")] if scores[i] > 0]
        if also:
            if self._position is None:
                self._position = {pid: i for i, pid in enumerate(self.ids)}
            chosen = set(top)
            for pid in also:
                i = self._position.get(pid)
                if i is not None and i not in chosen:
                    top.append(i)
                    chosen.add(i)
        return [(self.ids[i], float(scores[i])) for i in top]

    def passages_with(self, word: str) -> int:
        """How many passages hold `word` in their text (title included)."""
        found = terms(word)
        token = self._retriever.vocab_dict.get(found[0]) if len(found) == 1 and self.ids else None
        if token is None:
            return 0
        indptr = self._retriever.scores["indptr"]
        return int(indptr[token + 1] - indptr[token])


def _tag(field: str) -> str:
    """What a field's terms start with in the index; the text's terms are untagged."""
    return "" if field == "text" else f"{field}:"


# Sub-folders and files being written start with this; nothing reads them.
_TMP = ".tmp-"
IDS = "ids.json"
# Another process's sub-folder or file younger than this (seconds) may be about to be published.
_KEEP_RECENT = 60.0
_KEEP_UNFINISHED = 3600.0


def recorded_sources(folder: Path) -> dict[str, int]:
    """The folders (or files) the index saved in `folder` was built from, with their document
    counts; empty when it has none to give."""
    try:
        sources = (_read_ids(folder) or {}).get("sources")
    except KeywordIndexError:
        return {}
    if not isinstance(sources, dict):
        return {}
    return {str(k): v for k, v in sources.items() if isinstance(v, int)}


def _read_ids(folder: Path) -> dict[str, Any] | None:
    """The contents of ids.json; None when no index has been saved in `folder`."""
    path = folder / IDS
    try:
        if not path.exists() and not any(not e.name.startswith(_TMP) for e in folder.iterdir()):
            return None
        meta = json.loads(path.read_text("utf-8"))
        if not isinstance(meta, dict) or not isinstance(meta.get("ids"), list):
            raise ValueError("not a list of passage ids")
        if not isinstance(meta.get("dir", ""), str) or "/" in meta.get("dir", ""):
            raise ValueError("not a sub-folder name")
    except FileNotFoundError:
        if not folder.is_dir():
            return None
        raise KeywordIndexError(
            f"The keyword index in {folder} is damaged ({IDS} is missing)"
        ) from None
    except (OSError, ValueError) as e:
        raise KeywordIndexError(f"The keyword index in {folder} is damaged ({IDS}: {e})") from e
    return meta


def _load_bm25(path: Path, meta: dict[str, Any]):
    """The bm25s retriever saved in `path`, checked against the ids it should index."""
    import bm25s
    import numpy as np

    if not meta["ids"]:
        return None
    retriever = bm25s.BM25.load(str(path), show_progress=False)
    scores = retriever.scores
    data, indices, indptr = scores["data"], scores["indices"], scores["indptr"]
    ok = (
        scores["num_docs"] == len(meta["ids"])
        and len(indptr) > 0
        and indptr[-1] == len(data) == len(indices)
        and bool(np.all(np.diff(indptr) >= 0))
        and (not len(indices) or 0 <= indices.min() <= indices.max() < len(meta["ids"]))
        and all(isinstance(v, int) and 0 <= v < len(indptr) for v in retriever.vocab_dict.values())
    )
    if not ok:
        raise ValueError("its arrays do not match its passage ids")
    return retriever


def _prune(folder: Path, keep: str) -> None:
    """Delete superseded sub-folders and files (older versions kept their files in `folder`)."""
    try:
        current = (_read_ids(folder) or {}).get("dir")
    except KeywordIndexError:
        current = None
    now = time.time()
    for entry in folder.iterdir():
        if entry.name in (keep, current, IDS):
            continue
        try:
            age = now - entry.stat().st_mtime
        except OSError:
            continue  # another process deleted it
        if age < (_KEEP_UNFINISHED if entry.name.startswith(_TMP) else _KEEP_RECENT):
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
