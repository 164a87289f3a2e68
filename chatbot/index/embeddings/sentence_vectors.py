"""Sentence vectors for judging answers: MiniLM, cached in memory and on disk by content hash.

The offline model and the support check compare a question or a claim with single sentences of
the retrieved passages. Those sentences are embedded once — at ingest, or the first time a
passage is read — and kept in the embedding cache beside the index, so a question only embeds
itself. Thresholds in `offline.py` and `support.py` are MiniLM cosines, so this is always MiniLM,
whatever model embeds the passages for search.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from chatbot.text.sentences import split_sentences

# Sentences kept in memory (384 floats each: 1.5 KB).
IN_MEMORY = 20_000


class SentenceVectors:
    """Unit MiniLM vectors of texts; thread-safe. `persist` texts go to the on-disk cache too."""

    def __init__(self, cache_file: Path | None = None) -> None:
        self._cache_file = cache_file
        self._disk = None
        self._embeddings = None
        self._lock = threading.Lock()
        self._memory: OrderedDict[str, np.ndarray] = OrderedDict()

    def _model(self):
        if self._embeddings is None:
            from chatbot.index.embeddings.minilm import MiniLMEmbeddings

            self._embeddings = MiniLMEmbeddings()
        return self._embeddings

    def _open_disk(self):
        if self._disk is None:
            from chatbot.index.embeddings.cache import EmbeddingCache

            self._disk = EmbeddingCache(self._cache_file, self._model())
        return self._disk

    def _encode(self, texts: list[str], persist: bool) -> np.ndarray:
        if persist and self._cache_file is not None:
            matrix = self._open_disk().start(texts)()
        else:
            # One by one as queries: the search just embedded the same question.
            model = self._model()
            matrix = np.asarray([model.embed_query(t) for t in texts], dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms > 0, norms, 1.0)

    def __call__(self, texts: Sequence[str], *, persist: bool = True) -> np.ndarray:
        """One unit vector per text, in order; texts seen before are not embedded again."""
        with self._lock:
            todo = list(dict.fromkeys(t for t in texts if t not in self._memory))
        fresh = dict(zip(todo, self._encode(todo, persist))) if todo else {}
        with self._lock:
            self._memory.update(fresh)
            rows = [self._memory.get(t) for t in texts]
            for t in texts:
                if t in self._memory:
                    self._memory.move_to_end(t)
            while len(self._memory) > IN_MEMORY:
                self._memory.popitem(last=False)
        missing = [i for i, row in enumerate(rows) if row is None]
        if missing:  # evicted by another thread meanwhile
            again = self._encode([texts[i] for i in missing], persist)
            for i, row in zip(missing, again):
                rows[i] = row
        if not rows:
            return np.empty((0, 384), dtype=np.float32)
        return np.stack(rows)

    def cosines(self, text: str, others: Sequence[str]) -> np.ndarray:
        """The cosine of `text` (not kept on disk) with each of `others` (kept)."""
        if not others:
            return np.empty(0, dtype=np.float32)
        return self(others) @ self([text], persist=False)[0]

    def warm(self, passages: Iterable[str], progress: Callable[[int], None] | None = None) -> int:
        """Embed and cache every sentence of `passages` not cached yet; how many were new."""
        sentences = list(dict.fromkeys(s for text in passages for s in split_sentences(text)))
        if not sentences or self._cache_file is None:
            return 0
        disk = self._open_disk()
        before = disk.computed
        for start in range(0, len(sentences), 256):
            batch = sentences[start : start + 256]
            disk.start(batch)()
            if progress:
                progress(len(batch))
        return disk.computed - before


DEFAULT = SentenceVectors()
