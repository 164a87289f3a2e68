"""The embedding cache: vectors on disk keyed by content hash, and where passages are embedded.

The cache only saves work: every vector in it can be computed again from the documents, so a
damaged cache file is moved aside and a new one started, with a warning naming both.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Protocol

import numpy as np
from langchain_core.embeddings import Embeddings

log = logging.getLogger(__name__)


def embedding_name(embeddings: Embeddings) -> str:
    """A name that identifies the vectors an embedding model produces."""
    return getattr(embeddings, "model_name", None) or getattr(embeddings, "model", "unknown")


class Embedder(Protocol):
    """Where passages are embedded during an ingest: in this process or in a child process."""

    def submit(self, texts: list[str]) -> Future:
        """Start embedding `texts`; the Future gives one vector per text, in order."""
        ...

    def close(self, *, kill: bool = False) -> None:
        """Release what embedding holds (at once, dropping queued work, when `kill`)."""
        ...


class InProcessEmbedder:
    """Embeds in the calling thread when a batch is submitted; its Future is already done."""

    def __init__(self, embeddings: Embeddings) -> None:
        self.embeddings = embeddings

    def submit(self, texts: list[str]) -> Future:
        """Embed `texts` now."""
        done: Future = Future()
        done.set_result(self.embeddings.embed_documents(texts))
        return done

    def close(self, *, kill: bool = False) -> None:
        """Nothing runs in the background."""


class EmbeddingCache:
    """Vectors on disk keyed by (model, text) hash, so the same text is never embedded twice."""

    def __init__(self, path: Path, embeddings: Embeddings) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        try:
            self._db = self._connect()
        except sqlite3.DatabaseError as e:
            self._db = self._replace(e)
        self.embeddings = embeddings
        self._model = embedding_name(embeddings)
        self._here = InProcessEmbedder(embeddings)
        self.computed = 0  # texts the model embedded (the rest came from the cache)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        try:
            db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB)")
        except BaseException:
            db.close()
            raise
        return db

    def _replace(self, error: sqlite3.DatabaseError) -> sqlite3.Connection:
        """Move a damaged cache file aside and start an empty one; the vectors are recomputed.

        The cache only saves work: every vector in it can be computed again from the documents,
        so damage costs time, never data, and must not stop an ingest or a question.
        """
        if isinstance(error, sqlite3.OperationalError):
            raise error  # locked or unreadable, not damaged: moving it would lose good vectors
        if getattr(self, "_db", None) is not None:
            self._db.close()
        target = self.path.with_name(f"{self.path.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
        n = 1
        while target.exists():
            n += 1
            target = target.with_name(
                f"{self.path.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}-{n}"
            )
        for suffix in ("", "-journal", "-wal", "-shm"):
            part = self.path.with_name(self.path.name + suffix)
            if part.exists():
                part.rename(target.with_name(target.name + suffix))
        log.warning(
            "The embedding cache %s was damaged (%s): moved it aside to %s and started a new one; "
            "vectors it held are computed again.",
            self.path,
            error,
            target.name,
        )
        return self._connect()

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self._model}\0{text}".encode()).hexdigest()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for `texts`, computing only those not cached."""
        return self.start(texts)().tolist()

    def start(
        self, texts: Sequence[str], embedder: Embedder | None = None
    ) -> Callable[[], np.ndarray]:
        """Look `texts` up and hand the missing ones to `embedder`; call the result for the vectors.

        Without `embedder` the model embeds them here and now. Finishing caches the new vectors
        and returns all of them as one float32 array, in the order of `texts`.
        """
        keys = [self._key(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        with self._lock:
            try:
                found = self._lookup(keys)
            except sqlite3.DatabaseError as e:
                # SQLite meets damage inside the file only on the page it reads.
                self._db = self._replace(e)
        missing = [i for i, k in enumerate(keys) if k not in found]
        todo = [texts[i] for i in missing]
        pending = (embedder or self._here).submit(todo) if missing else None

        def finish() -> np.ndarray:
            if pending is not None:
                new = np.asarray(_result(pending), dtype=np.float32)
                rows = []
                for i, vec in zip(missing, new, strict=True):
                    found[keys[i]] = vec
                    rows.append((keys[i], vec.tobytes()))
                with self._lock:
                    try:
                        with self._db:
                            self._db.executemany(
                                "INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows
                            )
                    except sqlite3.DatabaseError as e:
                        self._db = self._replace(e)
                        with self._db:
                            self._db.executemany(
                                "INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows
                            )
                self.computed += len(missing)
            if not keys:
                return np.empty((0, 0), dtype=np.float32)
            return np.stack([found[k] for k in keys])

        return finish

    def _lookup(self, keys: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(f"SELECT key, vec FROM vectors WHERE key IN ({marks})", chunk)
            found.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
        return found


def _result(future: Future):
    """The future's result, waited for in short steps so that Ctrl-C still interrupts."""
    # A signal may be delivered to any thread; a wait without a timeout would never notice it.
    while True:
        try:
            return future.result(timeout=0.25)
        except TimeoutError:
            continue
