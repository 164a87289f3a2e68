"""The public `Chatbot` API: builds its parts on first use, indexes, answers, describes itself.

Answering is `pipeline.answer_stream`; this class holds what the steps need (settings, store,
retriever, chat model) and the lock that keeps two ingests of one bot apart.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from chatbot.answer.models.boundary import AnswerModel
from chatbot.answer.models.chat_answerer import ChatModelAnswerer
from chatbot.answer.pipeline import AnswerStream, History, answer_stream, check
from chatbot.errors import EmptyIndexError
from chatbot.index.embeddings.sentence_vectors import SentenceVectors
from chatbot.settings import DEFAULT_COLLECTION, Settings
from chatbot.values import Answer, Citation, Document, Passage, Support
from chatbot.verify.support import Evidence, check_claim, evidence

__all__ = ["Answer", "AnswerStream", "Chatbot", "Citation"]

UPLOADS = "uploads"  # under the data directory: files added in the web UI


class Chatbot:
    """Ask questions about the indexed papers; answers cite the passages they come from."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        llm: BaseChatModel | AnswerModel | None = None,
        **overrides: Any,
    ) -> None:
        self.settings = settings.with_(**overrides) if settings else Settings.load(**overrides)
        if isinstance(llm, BaseChatModel):
            llm = ChatModelAnswerer(llm, self.settings)
        self._model: AnswerModel | None = llm
        # Sentence vectors of the passages, kept beside the index's embedding cache.
        self.vectors = SentenceVectors(self.settings.data_dir / "embedding-cache.sqlite")
        self._store = None
        self._retriever = None
        self._ready = False
        self._changed = False
        self._lock = threading.Lock()

    # -- components, created on first use so `Chatbot()` itself is instant ---------------------

    @property
    def store(self):
        """The passage store (Chroma)."""
        if self._store is None:
            from chatbot.index.store import Store

            self._store = Store(self.settings)
        return self._store

    @property
    def retriever(self):
        """The hybrid retriever over the store."""
        if self._retriever is None:
            from chatbot.retrieve.hybrid import Retriever

            self._retriever = Retriever(self.store)
        return self._retriever

    @property
    def model(self) -> AnswerModel:
        """The answering model: the offline one unless a real model is configured."""
        if self._model is None:
            if self.settings.uses_offline_model:
                from chatbot.answer.models.offline import OfflineModel

                self._model = OfflineModel(self.vectors)
            else:
                from chatbot.answer.models.openai_compat import make_chat_model

                self._model = ChatModelAnswerer(make_chat_model(self.settings), self.settings)
        return self._model

    @property
    def index_changed(self) -> bool:
        """Whether this bot wrote to the index: an ingest changed or moved something, or stopped."""
        return self._changed

    # -- indexing ------------------------------------------------------------------------------

    def ingest(
        self,
        paths: Sequence[str | Path] | None = None,
        *,
        progress: bool | None = None,
        rebuild: bool = False,
        fields=None,
        replace: bool = False,
        drop: bool = False,
    ):
        """Index the documents under `paths` (default: the corpus folder), incrementally.

        `fields` (a `records.Fields`) names the id, title and text fields of JSON Lines records.
        A document whose id another file holds is skipped as a problem, unless `replace` moves
        the id to it. A `rebuild` that would lose documents from other folders, or other
        collections of a damaged store, raises IngestError naming them, unless `drop` says to.
        """
        from chatbot.index.documents import Splitter, find_files, load_documents
        from chatbot.index.fetch import localise
        from chatbot.index.sync import sync

        settings = self.settings
        # Links (https://…/paper.pdf, arXiv pages) are fetched into the data directory first.
        roots, fetched = localise(
            list(paths) if paths else [settings.corpus_dir],
            settings.data_dir,
            max_bytes=settings.max_file_bytes,
            timeout=settings.timeout,
            arxiv_base=settings.arxiv_url,
        )
        # Folders reached through links are covered too: their documents are stored under their
        # real paths, and one removed there is removed from the index.
        files, linked = find_files(roots)
        if rebuild and not drop:
            self._check_rebuild(roots, given=bool(paths), linked=linked)
        limits = settings.max_file_bytes, settings.max_pdf_pages
        docs, problems = load_documents(roots, fields, *limits, files=files)
        problems, covered = fetched + problems, [*roots, *linked]
        with self._lock:
            # Counted as a change until it is known that nothing changed (also when interrupted).
            changed_before, self._changed = self._changed, True
            if rebuild:
                from chatbot.index.store import Store

                # A rebuild may be how the user moves to other embeddings: skip the model check.
                self._store, self._retriever = Store(self.settings, rebuild=True), None
            splitter = Splitter(self.settings.chunk_tokens, self.settings.chunk_overlap)
            report = sync(self.store, splitter, docs, covered, problems, progress, replace)
            self._changed = changed_before or rebuild or report.changed or bool(report.relocated)
            if report.changed or rebuild:
                self._warm_sentences(report.written, progress)
                self.retriever.rebuild_keyword_index()
            else:
                # Loading checks the keyword index: a damaged one is rebuilt now, with a warning.
                self.retriever.keyword_index()
            # An ingest that left the index empty leaves it to ensure_index to say so.
            self._ready = self.store.count() > 0
        return report

    def _warm_sentences(self, texts: list[str], progress: bool | None) -> None:
        """Embed the sentences of the passages just written, so no question waits for them.

        Passages written earlier have theirs in the cache already, or (written by an ingest that
        was interrupted first) get them the first time a question reads them.
        """
        from tqdm import tqdm

        with tqdm(
            desc="sentences", unit=" sentences", disable=None if progress is None else not progress
        ) as bar:
            self.vectors.warm(texts, bar.update)

    def _check_rebuild(
        self, roots: Sequence[str | Path], *, given: bool = True, linked: Sequence[Path] = ()
    ) -> None:
        """Raise IngestError when rebuilding from `roots` would drop documents without a word.

        Documents under the `linked` folders (reached through links under `roots`) are kept. The
        command it names rebuilds every source: the `roots` the user `given` and the sources
        they leave out; without given paths, the sources the collection holds.
        """
        from chatbot.errors import ConfigError, IngestError, StoreDamagedError
        from chatbot.index.bm25 import recorded_sources
        from chatbot.index.store import Store
        from chatbot.index.sync import left_out, sources, uncovered

        name = self.settings.collection
        others: list[str] = []
        try:
            try:
                stored = self.store.documents()
            except ConfigError:  # built with other embeddings: what the rebuild is for
                stored = Store(self.settings, any_model=True).documents()
            held, dropped = sources(stored), left_out(stored, [*roots, *linked])
        except StoreDamagedError:
            # The store cannot say where its documents came from; the keyword index recorded it.
            # Moving the damaged store aside drops every collection it held, not only this one.
            held = recorded_sources(self.settings.data_dir / "bm25" / name)
            dropped, others = uncovered(held, [*roots, *linked]), self._other_collections()
        if not dropped and not others:
            return
        paths = [*map(str, roots), *dropped] if given else list(held)
        command = self.settings.command(
            "ingest", "--rebuild", *dict.fromkeys(p.split(" (")[0] for p in paths)
        )
        problems = []
        if dropped:
            shown = "; ".join(f"{where} ({n})" for where, n in dropped.items())
            problems.append(
                f"Rebuilding collection {name!r} from {', '.join(map(str, roots))} alone would "
                f"drop the documents it holds from {shown}: run `{command}`"
            )
        if others:
            each = self.settings.with_(collection="NAME").command("ingest", "--rebuild")
            problems.append(
                f"The damaged store also holds the collection(s) {', '.join(others)}: the "
                "rebuild moves the whole store aside, so rebuild each of them afterwards with "
                f"`{each} PATH…`"
            )
        raise IngestError("; ".join(problems) + "; or add --yes to go ahead and drop them.")

    def _other_collections(self) -> list[str]:
        """Other collections of the embedded store, as their keyword indexes on disk name them."""
        folder = self.settings.data_dir / "bm25"
        if self.settings.chroma_url or not folder.is_dir():
            return []
        name = self.settings.collection
        return sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name != name)

    def ensure_index(self) -> None:
        """Build the index from the corpus folder on first use if the store is empty.

        An index with nothing in it raises EmptyIndexError naming the command that fills it:
        answering from it would say "the corpus does not answer" to every question.
        """
        if self._ready:
            return
        if self.store.count() == 0:
            name, corpus = self.settings.collection, self.settings.corpus_dir
            fill = "(in Python: `bot.ingest([PATH])`)"
            if name != DEFAULT_COLLECTION:
                # Filling a mistyped or not-yet-ingested collection with the summaries would
                # mix them into it for good.
                raise EmptyIndexError(
                    f"Collection {name!r} is empty: run `chatbot --collection {name} ingest PATH` "
                    f"first {fill}, or check its name."
                )
            if not corpus.is_dir():
                raise EmptyIndexError(
                    f"The index is empty and the corpus folder {corpus} does not exist: run "
                    f"`chatbot ingest PATH` on your documents {fill}, or set CHATBOT_CORPUS_DIR "
                    "to their folder."
                )
            self.ingest()
            if not self._ready:
                raise EmptyIndexError(
                    f"The index is empty: the corpus folder {corpus} holds no .pdf, .md, .txt or "
                    ".jsonl document that could be indexed. Add some and run `chatbot ingest`, or "
                    f"run `chatbot ingest PATH` on another folder {fill}."
                )
        self._ready = True

    # -- asking --------------------------------------------------------------------------------

    def retrieve(
        self, question: str, k: int | None = None, where: dict | None = None
    ) -> list[Passage]:
        """The `k` passages that best match `question`, best first."""
        check(question, [], k, where, self.settings)
        self.ensure_index()
        return self.retriever.search(question, k, where).passages

    def ask(
        self,
        question: str,
        history: History | None = None,
        *,
        k: int | None = None,
        where: dict | None = None,
    ) -> Answer:
        """Answer `question` from the corpus, with `[n]` citations."""
        return self.stream(question, history, k=k, where=where).result()

    def stream(
        self,
        question: str,
        history: History | None = None,
        *,
        k: int | None = None,
        where: dict | None = None,
    ) -> AnswerStream:
        """Answer `question` piece by piece; the stream's `.answer` is set when it ends."""
        return answer_stream(self, question, history, k=k, where=where)

    def check_claim(self, claim: str, passage_text: str) -> Support:
        """Whether `passage_text` supports `claim`, how well (0-1), and its best sentence(s).

        The figures and names of the claim must be in the passage, its negation must agree with
        the best passage sentence's, and its wording and meaning must be close to the passage.
        Every answer's sentences get the same check against the passages they cite.
        """
        return check_claim(claim, passage_text, self.vectors)

    def check_answer(
        self,
        text: str,
        passages: Sequence[Passage],
        numbers: dict[int, int] | None = None,
        *,
        model: AnswerModel | None = None,
    ) -> Evidence:
        """Each citation's supporting sentences and the sentences of `text` nothing backs.

        With CHATBOT_SUPPORT_CHECK=model and a real model, the model judges the sentences.
        """
        model = model or self.model
        judge = None
        if self.settings.support_check == "model" and isinstance(model, ChatModelAnswerer):
            judge = model.judge
        return evidence(text, passages, numbers, self.vectors, judge)

    # -- files added through the web UI -------------------------------------------------------

    @property
    def uploads_dir(self) -> Path:
        """Where uploaded files are kept: `uploads/` in the data directory."""
        return Path(self.settings.data_dir) / UPLOADS

    def add_files(self, files: Sequence[str | Path], names: Sequence[str] | None = None):
        """Copy `files` into `uploads_dir` under safe versions of `names` (default: their own)
        and index them; a refused file is not kept. Returns the IngestReport and the kept paths."""
        import shutil

        from chatbot.index.fetch import safe_name

        folder = self.uploads_dir
        folder.mkdir(parents=True, exist_ok=True)
        kept = []
        for file, name in zip(files, names or [Path(f).name for f in files], strict=True):
            target = folder / safe_name(name)
            shutil.copyfile(file, target)
            kept.append(target)
        report = self.ingest(kept, progress=True)
        refused = {Path(p.source.partition("#")[0]).name for p in report.problems}
        for target in kept:
            if target.name in refused:
                target.unlink(missing_ok=True)
        return report, [t for t in kept if t.name not in refused]

    def delete_upload(self, doc_id: str) -> bool:
        """Remove an uploaded document, its file and its passages; False when it is not one."""
        stored = self.store.documents().get(doc_id)
        folder = self.uploads_dir.resolve()
        if stored is None or not all(Path(s).parent == folder for s in stored.sources):
            return False
        for source in stored.sources:
            Path(source).unlink(missing_ok=True)
        self.ingest([folder], progress=False)
        return True

    def pdf_files(self) -> list[Path]:
        """The folders of uploaded and fetched PDFs, and every PDF file indexed now."""
        from chatbot.index.fetch import FOLDER

        data = Path(self.settings.data_dir).resolve()
        sources = {s for d in self.store.documents().values() for s in d.sources}
        files = sorted(Path(s) for s in sources if s.lower().endswith(".pdf"))
        return [data / UPLOADS, data / FOLDER, *(f for f in files if f.is_absolute())]

    def documents(self) -> list[Document]:
        """The indexed documents, each rebuilt from its passages, sorted by id."""
        _, texts, metas = self.store.all_passages()
        return documents_from_passages(texts, metas)

    def info(self) -> dict[str, Any]:
        """Where the data lives, what is indexed, and which models are in use."""
        from chatbot.index.store import embedding_name
        from chatbot.index.sync import sources

        store = self.store
        docs = store.documents()
        return {
            "data_dir": str(self.settings.data_dir),
            "store": self.settings.chroma_url or str(self.settings.data_dir / "chroma"),
            "collection": self.settings.collection,
            "documents": len(docs),
            "sources": sources(docs),
            "passages": store.count(),
            # Loaded as a question would load it: a damaged one is rebuilt, with a warning.
            "keyword_passages": len(self.retriever.keyword_index().ids),
            "embedding_model": embedding_name(store.embeddings),
            "model": self.settings.model_label,
        }


def documents_from_passages(
    texts: Sequence[str], metas: Sequence[dict[str, Any] | None]
) -> list[Document]:
    """Documents rebuilt from their stored passages, put back in order and without overlaps."""
    from chatbot.index.documents import PLACE
    from chatbot.index.store import RESERVED

    chunks: dict[str, list[tuple[int, str]]] = {}
    heads: dict[str, dict[str, Any]] = {}
    for text, meta in zip(texts, metas, strict=True):
        meta = meta or {}
        doc_id = meta.get("doc_id", "")
        chunks.setdefault(doc_id, []).append((int(meta.get("chunk", 0)), text))
        heads.setdefault(doc_id, meta)
    return [
        Document(
            doc_id,
            heads[doc_id].get("title") or doc_id,
            join_overlapping([t for _, t in sorted(chunks[doc_id])]),
            heads[doc_id].get("source", ""),
            # A passage's page and section are its own, not the document's.
            {k: v for k, v in heads[doc_id].items() if k not in (*RESERVED, *PLACE)},
        )
        for doc_id in sorted(chunks)
    ]


def join_overlapping(parts: list[str]) -> str:
    """Passages in order, each without the text it repeats from the end of the one before."""
    text = parts[0] if parts else ""
    for part in parts[1:]:
        size = next(
            (n for n in range(min(len(text), len(part), 1000), 15, -1) if text.endswith(part[:n])),
            0,
        )
        text = f"{text}{part[size:]}" if size else f"{text}\n\n{part}"
    return text
