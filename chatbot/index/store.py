"""The passage store: Chroma (embedded or a server) via langchain-chroma, and an embedding cache."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from chatbot.errors import ConfigError, StoreDamagedError, StoreError
from chatbot.index import store_folder as chroma_dir
from chatbot.index.embeddings.cache import (  # noqa: F401 (Embedder and InProcessEmbedder are used from here)
    Embedder,
    EmbeddingCache,
    InProcessEmbedder,
    embedding_name,
)
from chatbot.settings import Settings
from chatbot.values import Passage

# Metadata keys the chatbot writes on every passage; a document's own keys may not overwrite them.
RESERVED = ("doc_id", "title", "fingerprint", "n_passages", "source", "chunk")


def make_embeddings(settings: Settings) -> Embeddings:
    """The embedding model named by the settings."""
    if settings.embeddings == "openai":
        from langchain_openai import OpenAIEmbeddings

        key = settings.embedding_api_key or settings.openai_api_key
        base = settings.embedding_base_url or settings.openai_base_url
        if not (key or base):
            raise ConfigError(
                "CHATBOT_EMBEDDINGS=openai needs OPENAI_API_KEY (or CHATBOT_EMBEDDING_BASE_URL for "
                "a local server); unset CHATBOT_EMBEDDINGS to use the offline model."
            )
        # check_embedding_ctx_length=False: the length check would download a tiktoken file.
        return OpenAIEmbeddings(
            model=settings.embedding_model,
            base_url=base,
            api_key=key or "not-needed",
            check_embedding_ctx_length=False,
            max_retries=settings.max_retries,
            timeout=settings.timeout,
        )
    from chatbot.index.embeddings.minilm import MiniLMEmbeddings

    return MiniLMEmbeddings()


@dataclass(frozen=True)
class StoredDoc:
    """What the store holds of one document."""

    doc_id: str
    sources: frozenset[str]  # more than one only while an interrupted move is unfinished
    fingerprints: frozenset[str]
    complete: bool

    @property
    def source(self) -> str:
        """Where the document came from (an absolute path; a relative one in older indexes)."""
        return min(self.sources, default="")


def _translated(method):
    """Chroma's failures on a damaged or read-only store become the StoreError saying what to do.

    SQLite finds damage inside the database only when it reads the damaged page, so any call
    may be the first to meet it, not only opening the store.
    """

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except BaseException as e:  # a panic in Chroma's Rust core is a BaseException
            error = chroma_dir.translate(e, self.settings)
            if error is None or error is e:
                raise
            raise error from e

    return call


class Store:
    """One Chroma collection of passages."""

    def __init__(
        self,
        settings: Settings,
        embeddings: Embeddings | None = None,
        *,
        rebuild: bool = False,
        any_model: bool = False,
    ) -> None:
        """Open the collection (emptied for a `rebuild`).

        A collection built with other embeddings is refused unless it is being rebuilt, or
        opened with `any_model` only to read what it holds.
        """
        self.settings = settings
        self.embeddings = embeddings or make_embeddings(settings)
        # Every use of the store embeds: load the model while chromadb is being imported.
        getattr(self.embeddings, "load_in_background", lambda: None)()
        name = embedding_name(self.embeddings)
        try:
            built_with = self._open(name, rebuild)
        except StoreDamagedError:
            if not rebuild:
                raise
            # A rebuild replaces every passage anyway; the damaged files are kept, renamed.
            chroma_dir.move_aside(settings)
            built_with = self._open(name, rebuild)
        if not (rebuild or any_model) and built_with and built_with != name:
            raise ConfigError(
                f"Collection {settings.collection!r} was built with embeddings {built_with!r}, not "
                f"{name!r}: run `chatbot ingest --rebuild`, or pick another CHATBOT_COLLECTION."
            )
        self.cache = EmbeddingCache(settings.data_dir / "embedding-cache.sqlite", self.embeddings)

    def _open(self, name: str, rebuild: bool) -> str | None:
        """Open the collection (emptied for a rebuild); return the embeddings it was built with."""
        from langchain_chroma import Chroma

        self.client = _client(self.settings)
        try:
            self.vs = Chroma(
                collection_name=self.settings.collection,
                embedding_function=self.embeddings,
                client=self.client,
                collection_configuration={"hnsw": {"space": "cosine"}},
                collection_metadata={"embedding_model": name},
            )
            built_with = (self.collection.metadata or {}).get("embedding_model")
            if rebuild:
                self.reset()
        except BaseException as e:  # a panic in Chroma's Rust core is a BaseException
            error = chroma_dir.translate(e, self.settings)
            if error is not None:
                raise error from e
            if not isinstance(e, Exception):
                raise
            raise StoreError(
                f"Cannot open the Chroma collection {self.settings.collection!r}: {e}"
            ) from e
        return built_with

    @property
    def collection(self):
        """The raw chromadb collection."""
        return self.vs._collection

    @_translated
    def count(self) -> int:
        """Number of passages stored."""
        return self.collection.count()

    @property
    @_translated
    def revision(self) -> str:
        """Changes whenever passages may have changed; the keyword index is tagged with it."""
        # Read afresh (under a millisecond): another process or machine may have ingested.
        fresh = self.client.get_collection(self.settings.collection)
        return str((fresh.metadata or {}).get("revision", ""))

    @_translated
    def bump_revision(self) -> str:
        """Mark the collection as changed (before changing it, so a crash leaves it marked)."""
        rev = uuid.uuid4().hex
        meta = dict(self.collection.metadata or {})
        meta.pop("hnsw:space", None)
        meta["revision"] = rev
        self.collection.modify(metadata=meta)
        return rev

    @_translated
    def documents(self) -> dict[str, StoredDoc]:
        """Every stored document with the fingerprints of its passages and whether it is whole."""
        got = self.collection.get(include=["metadatas"])
        seen: dict[str, dict[str, Any]] = {}
        for meta in got["metadatas"] or []:
            if not meta or "doc_id" not in meta:
                raise self.foreign()
            d = seen.setdefault(meta["doc_id"], {"sources": set(), "fps": {}})
            d["sources"].add(meta.get("source", ""))
            fp = meta.get("fingerprint", "")
            # A long document's passages written before its splitting ended carry 0; the last
            # ones carry the count, so a document cut short by an interruption is never whole.
            count, expected = d["fps"].get(fp, (0, 0))
            d["fps"][fp] = (count + 1, max(expected, meta.get("n_passages", 0)))
        return {
            doc_id: StoredDoc(
                doc_id,
                frozenset(d["sources"]),
                frozenset(d["fps"]),
                complete=len(d["fps"]) == 1 and all(c == e for c, e in d["fps"].values()),
            )
            for doc_id, d in seen.items()
        }

    def foreign(self) -> StoreError:
        """The error for a collection another program made: its entries name no document."""
        name = self.settings.collection
        return StoreError(
            f"Collection {name!r} was not made by this chatbot: its entries have no 'doc_id' "
            "metadata, so its documents cannot be listed or updated. Use another collection "
            f"(--collection NAME or CHATBOT_COLLECTION), or delete {name!r} and ingest your "
            "documents into it."
        )

    @_translated
    def write(
        self,
        passages: Sequence[Passage],
        vectors: np.ndarray | Sequence[Sequence[float]],
        metadatas: Sequence[dict[str, Any]],
    ) -> None:
        """Upsert passages with their vectors; ids are content hashes, so never a duplicate."""
        if not passages:
            return
        self.collection.upsert(
            ids=[p.passage_id for p in passages],
            documents=[p.text for p in passages],
            embeddings=vectors,
            metadatas=list(metadatas),
        )

    @_translated
    def set_source(self, doc_id: str, source: str) -> None:
        """Record that a document's passages come from `source`; nothing is embedded again."""
        got = self.collection.get(where={"doc_id": doc_id}, include=["metadatas"])
        if got["ids"]:
            metas = [{**meta, "source": source} for meta in got["metadatas"]]
            self.collection.update(ids=got["ids"], metadatas=metas)

    @_translated
    def delete_doc(self, doc_id: str, keep_fingerprint: str | None = None) -> None:
        """Remove a document's passages (all, or those not of `keep_fingerprint`)."""
        where: dict[str, Any] = {"doc_id": doc_id}
        if keep_fingerprint:
            where = {"$and": [where, {"fingerprint": {"$ne": keep_fingerprint}}]}
        self.collection.delete(where=where)

    @_translated
    def all_passages(self) -> tuple[list[str], list[str], list[dict[str, Any]]]:
        """Ids, texts and metadata of every passage, for rebuilding the keyword index."""
        got = self.collection.get(include=["documents", "metadatas"])
        return got["ids"], got["documents"] or [], got["metadatas"] or []

    @_translated
    def get(self, ids: Sequence[str], where: dict | None = None) -> dict[str, Passage]:
        """Passages by id (those matching `where`, when given)."""
        if not ids:
            return {}
        got = self.collection.get(ids=list(ids), where=where, include=["documents", "metadatas"])
        return {
            i: to_passage(i, doc, meta)
            for i, doc, meta in zip(got["ids"], got["documents"], got["metadatas"])
        }

    @_translated
    def nearest(
        self, vector: Sequence[float], n: int, where: dict | None = None
    ) -> list[tuple[str, float]]:
        """Ids of the nearest passages to `vector` with their cosine similarity, best first."""
        if n <= 0:
            return []
        # No count() first: Chroma returns fewer hits when it holds fewer, and counting a
        # 20,000-passage collection took 5 ms, twice the search itself.
        got = self.collection.query(
            query_embeddings=[np.asarray(vector, dtype=np.float32)],
            n_results=n,
            where=where,
            include=["distances"],
        )
        return [(i, 1.0 - d) for i, d in zip(got["ids"][0], got["distances"][0])]

    @_translated
    def similarities(self, vector: Sequence[float], ids: Sequence[str]) -> list[tuple[str, float]]:
        """The cosine similarity of `vector` to each stored passage of `ids` (those it holds)."""
        if not ids:
            return []
        got = self._embeddings_of(list(ids))
        if not got["ids"]:
            return []
        stored = np.asarray(got["embeddings"], dtype=np.float32).reshape(len(got["ids"]), -1)
        query = np.asarray(vector, dtype=np.float32)
        norms = np.linalg.norm(stored, axis=1) * (np.linalg.norm(query) or 1.0)
        sims = stored @ query / np.where(norms > 0, norms, 1.0)
        return [(i, float(s)) for i, s in zip(got["ids"], sims, strict=True)]

    def _embeddings_of(self, ids: list[str]) -> dict[str, list]:
        """The stored vectors of `ids`, leaving out those this process cannot read yet.

        Passages another process added after this one opened the collection are in the shared
        database, so the keyword side finds them, but this process's copy of the vector
        segment does not hold them: Chroma then fails the whole batch ("Error finding id").
        Read one by one instead, and leave those out; they keep the dense side's lowest score.
        """
        try:
            return self.collection.get(ids=ids, include=["embeddings"])
        except Exception as e:  # chromadb.errors.InternalError, imported lazily elsewhere
            if "finding id" not in str(e):
                raise
        found: dict[str, list] = {"ids": [], "embeddings": []}
        for pid in ids:
            try:
                one = self.collection.get(ids=[pid], include=["embeddings"])
            except Exception as e:
                if "finding id" not in str(e):
                    raise
                continue
            found["ids"] += one["ids"]
            found["embeddings"] += list(one["embeddings"])
        return found

    @_translated
    def reset(self) -> None:
        """Drop every passage of the collection (for a rebuild)."""
        self.vs.reset_collection()


def embed_text(p: Passage) -> str:
    """The text that is embedded: the passage, with its document's title for context."""
    if p.title and not p.text.startswith(p.title):
        return f"{p.title}\n{p.text}"
    return p.text


def to_passage(passage_id: str, text: str, meta: dict[str, Any] | None) -> Passage:
    """A Passage from what Chroma returns."""
    meta = dict(meta or {})
    extra = {k: v for k, v in meta.items() if k not in RESERVED}
    return Passage(passage_id, meta.get("doc_id", ""), meta.get("title", ""), text, 0.0, extra)


def _client(settings: Settings):
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if settings.chroma_url:
        from urllib.parse import urlparse

        url = urlparse(settings.chroma_url)
        try:
            return chromadb.HttpClient(
                host=url.hostname or "127.0.0.1",
                port=url.port or (443 if url.scheme == "https" else 8000),
                ssl=url.scheme == "https",
                settings=chroma_settings,
            )
        except Exception as e:
            raise StoreError(
                f"Cannot reach the Chroma server at {settings.chroma_url} ({e}). Start it with "
                "`chroma run --path DIR --host 127.0.0.1 --port 8000`, or unset CHATBOT_CHROMA_URL "
                "to use the embedded store."
            ) from e
    return chroma_dir.open_client(settings, chroma_settings)
