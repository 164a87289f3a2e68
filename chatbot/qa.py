"""The question-answering pipeline and the public `Chatbot` API."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from . import citations
from .corpus import Document, Passage
from .errors import ChatbotError, ModelError, QuestionError, StoreError
from .keyword import asks_for_list
from .prompts import NO_ANSWER, escape, format_history, format_passages, load_prompts
from .settings import DEFAULT_COLLECTION, Settings

History = Sequence[dict[str, str]]
# Lone surrogates: how Python keeps the bytes of input that was not valid UTF-8.
_UNDECODED = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Citation:
    """A passage the answer cites as `[n]`."""

    n: int
    doc_id: str
    title: str
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str | None:
        """Link to the paper, when the document has one."""
        return self.metadata.get("url")

    @property
    def paper(self) -> str | None:
        """The paper's own title, when known."""
        return self.metadata.get("paper")

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape used by the CLI and the UI."""
        return {
            "n": self.n,
            "doc_id": self.doc_id,
            "title": self.title,
            "text": self.text,
            "score": self.score,
            "paper": self.paper,
            "url": self.url,
        }


@dataclass(frozen=True)
class Answer:
    """An answer with the passages it cites, and how it was produced."""

    question: str
    text: str
    citations: list[Citation]
    abstained: bool
    standalone_question: str
    passages: list[Passage] = field(default_factory=list)  # shown to the model, best first
    usage: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """`{"answer", "abstained", "citations": [...]}`, as `chatbot ask --json` prints it."""
        return {
            "answer": self.text,
            "abstained": self.abstained,
            "citations": [c.to_dict() for c in self.citations],
        }


class AnswerStream:
    """Iterates over the answer's text pieces; `.answer` holds the full Answer once done."""

    def __init__(self, pieces: Iterator[str]) -> None:
        self._pieces = pieces
        self.answer: Answer | None = None

    def __iter__(self) -> Iterator[str]:
        return self._pieces


class Chatbot:
    """Ask questions about the indexed papers; answers cite the passages they come from."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        llm: BaseChatModel | None = None,
        **overrides: Any,
    ) -> None:
        self.settings = settings.with_(**overrides) if settings else Settings.load(**overrides)
        self._llm = llm
        self._store = None
        self._retriever = None
        self._ready = False
        self.wrote = False  # True once this bot has written to the index
        self._lock = threading.Lock()

    # -- components, created on first use so `Chatbot()` itself is instant ---------------------

    @property
    def store(self):
        """The passage store (Chroma)."""
        if self._store is None:
            from .store import Store

            self._store = Store(self.settings)
        return self._store

    @property
    def retriever(self):
        """The hybrid retriever over the store."""
        if self._retriever is None:
            from .retrieval import Retriever

            self._retriever = Retriever(self.store)
        return self._retriever

    @property
    def llm(self) -> BaseChatModel:
        """The chat model: the offline one unless a real model is configured."""
        if self._llm is None:
            from .llm import make_chat_model

            self._llm = make_chat_model(self.settings)
        return self._llm

    # -- indexing ------------------------------------------------------------------------------

    def ingest(
        self,
        paths: Sequence[str | Path] | None = None,
        *,
        progress: bool | None = None,
        rebuild: bool = False,
        fields=None,
        replace: bool = False,
    ):
        """Index the documents under `paths` (default: the corpus folder), incrementally.

        `fields` (a `records.Fields`) names the id, title and text fields of JSON Lines records.
        A document whose id another file holds is skipped as a problem, unless `replace` moves
        the id to it.
        """
        from .corpus import Splitter, load_documents
        from .ingest import sync

        roots = list(paths) if paths else [self.settings.corpus_dir]
        docs, problems = load_documents(roots, fields, self.settings.max_file_bytes)
        with self._lock:
            # Counted as a write until it is known that nothing changed (also when interrupted).
            wrote_before, self.wrote = self.wrote, True
            if rebuild:
                from .store import Store

                # A rebuild may be how the user moves to other embeddings: skip the model check.
                self._store, self._retriever = Store(self.settings, rebuild=True), None
            splitter = Splitter(self.settings.chunk_tokens, self.settings.chunk_overlap)
            report = sync(
                self.store, splitter, docs, roots, problems, progress=progress, replace=replace
            )
            self.wrote = wrote_before or rebuild or report.changed or bool(report.relocated)
            if report.changed or rebuild:
                self.retriever.rebuild_keyword_index()
            else:
                # Loading checks the keyword index: a damaged one is rebuilt now, with a warning.
                self.retriever.keyword_index()
            self._ready = True
        return report

    def ensure_index(self) -> None:
        """Build the index from the corpus folder on first use if the store is empty."""
        if self._ready:
            return
        if self.store.count() == 0:
            if self.settings.collection != DEFAULT_COLLECTION:
                # Filling a mistyped or not-yet-ingested collection with the summaries would
                # mix them into it for good.
                raise StoreError(
                    f"Collection {self.settings.collection!r} is empty: run `chatbot --collection "
                    f"{self.settings.collection} ingest PATH` first (or check its name)."
                )
            if self.settings.corpus_dir.is_dir():
                self.ingest()
        self._ready = True

    # -- asking --------------------------------------------------------------------------------

    def retrieve(
        self, question: str, k: int | None = None, where: dict | None = None
    ) -> list[Passage]:
        """The `k` passages that best match `question`, best first."""
        self._check(question, [], k, where)
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
        stream = self.stream(question, history, k=k, where=where)
        for _ in stream:
            pass
        assert stream.answer is not None
        return stream.answer

    def stream(
        self,
        question: str,
        history: History | None = None,
        *,
        k: int | None = None,
        where: dict | None = None,
    ) -> AnswerStream:
        """Answer `question` piece by piece; the stream's `.answer` is set when it ends."""
        history = list(history or [])
        self._check(question, history, k, where)
        self.ensure_index()
        from .llm import UsageTracker

        timings: dict[str, float] = {}
        started = time.perf_counter()
        # Adds up the tokens of every model call made for this question (the offline model
        # costs nothing, and counting would load a tokenizer for no one).
        tracker = None if self._offline else UsageTracker(self.settings.model_name)
        standalone = self._standalone(question.strip(), history, tracker)
        timings["condense"] = time.perf_counter() - started
        t = time.perf_counter()
        if k is None and asks_for_list(standalone):
            # A question about several works needs more than the usual handful of passages.
            k = self.settings.top_k + 3
        found = self.retriever.search(standalone, k, where)
        timings["retrieve"] = time.perf_counter() - t
        stream = AnswerStream(iter(()))
        # The passages the model is shown: the budget may leave the lowest-ranked ones out.
        shown = list(found.passages)

        def finish(text: str) -> None:
            timings["total"] = time.perf_counter() - started
            stream.answer = self._answer(question, standalone, text, shown, timings, tracker)

        if not found.relevant:
            # Nothing relevant: say so without asking the model to invent something.
            def abstain() -> Iterator[str]:
                yield NO_ANSWER
                finish(NO_ANSWER)

            stream._pieces = abstain()
            return stream

        def generate() -> Iterator[str]:
            t0 = time.perf_counter()
            parts: list[str] = []
            for piece in self._generate(standalone, shown, history, tracker):
                parts.append(piece)
                yield piece
            timings["generate"] = time.perf_counter() - t0
            text = "".join(parts).strip()
            if not text:
                raise ModelError("The model returned an empty answer; try again or another model.")
            finish(text)

        stream._pieces = generate()
        return stream

    # -- pieces of the pipeline ----------------------------------------------------------------

    @property
    def _offline(self) -> bool:
        from .offline import OfflineChatModel

        return isinstance(self.llm, OfflineChatModel)

    def _fit(self, render, passages, history, budget, **kwargs):
        """Trim passages, then turns, to the model's context window (the offline model has none)."""
        from .budget import Fitted, fit

        if self._offline:
            return Fitted(list(passages), list(history), 0, 0, 0)
        return fit(render, passages, history, budget, **kwargs)

    def _check(self, question: str, history: History, k=None, where=None) -> None:
        from .options import check_k, check_where

        if not isinstance(question, str) or not question.strip():
            raise QuestionError("The question is empty: type a question about the papers.")
        limit = self.settings.max_question_chars
        if len(question) > limit:
            raise QuestionError(
                f"The question is {len(question)} characters long; the limit is {limit} "
                "(CHATBOT_MAX_QUESTION_CHARS). Shorten it."
            )
        for turn in history:
            if (
                not isinstance(turn, dict)
                or turn.get("role") not in ("user", "assistant")
                or not isinstance(turn.get("content"), str)
            ):
                raise QuestionError(
                    'Each history turn must be {"role": "user" or "assistant", "content": str}.'
                )
        for text in (question, *(turn["content"] for turn in history)):
            if bad := _UNDECODED.search(text):
                raise QuestionError(
                    f"The text holds a byte that is not UTF-8 (at character {bad.start() + 1}): "
                    "decode the input as UTF-8, replacing what cannot be decoded."
                )
        check_k(k)
        check_where(where)

    def _chain(self, name: str):
        prompts = load_prompts()
        if name == "condense":
            template = ChatPromptTemplate.from_messages([("human", prompts.condense)])
        else:
            template = ChatPromptTemplate.from_messages(
                [
                    ("system", prompts.system),
                    MessagesPlaceholder("history"),
                    ("human", prompts.answer),
                ]
            )
        return template | self.llm | StrOutputParser()

    def _standalone(self, question: str, history: History, tracker) -> str:
        from .budget import Budget

        if not any(t["role"] == "user" for t in history):
            return question
        chain = self._chain("condense")
        # A long conversation loses its oldest turns first to fit the context window.
        fitted = self._fit(
            lambda _, turns: chain.first.format_messages(
                history=format_history(turns), question=escape(question)
            ),
            [],
            history,
            Budget.for_settings(self.settings),
            size=lambda turn: turn["content"],
            keep_passages=0,
        )
        try:
            out = chain.invoke(
                {"history": format_history(fitted.history), "question": escape(question)},
                config={"callbacks": [tracker] if tracker else []},
            )
        except ChatbotError:
            raise
        except Exception as e:
            raise ModelError(f"The model failed to rewrite the follow-up question: {e}") from e
        out = out.strip().strip('"').strip()
        return out or question

    def _generate(
        self, question: str, passages: list[Passage], history: History, tracker
    ) -> Iterator[str]:
        """Stream the answer; `passages` is cut down in place to those the prompt had room for."""
        from .budget import Budget

        kinds = {"user": HumanMessage, "assistant": AIMessage}
        messages = [kinds[t["role"]](escape(t["content"])) for t in history]
        chain = self._chain("answer")
        fixed = {"question": escape(question), "no_answer": NO_ANSWER}
        # The lowest-ranked passages go first, then the oldest turns, until the prompt fits.
        fitted = self._fit(
            lambda ps, turns: chain.first.format_messages(
                passages=format_passages(ps), history=turns, **fixed
            ),
            passages,
            messages,
            Budget.for_settings(self.settings),
            size=lambda x: x.text if isinstance(x, Passage) else str(x.content),
        )
        passages[:] = fitted.passages
        inputs = {**fixed, "passages": format_passages(fitted.passages), "history": fitted.history}
        # Only the passages the model was shown may be cited.
        shown = set(range(1, len(fitted.passages) + 1))
        try:
            raw = chain.stream(inputs, config={"callbacks": [tracker] if tracker else []})
            yield from citations.clean_stream(raw, shown)
        except ChatbotError:
            raise
        except Exception as e:
            raise ModelError(
                f"The model failed to answer ({e}); check CHATBOT_MODEL and OPENAI_BASE_URL, "
                "or use the offline model with --model offline."
            ) from e

    def _answer(
        self,
        question: str,
        standalone: str,
        text: str,
        passages: list[Passage],
        timings: dict[str, float],
        tracker,
    ) -> Answer:
        usage = tracker.usage() if tracker else {}
        if tracker and tracker.first_token is not None:
            timings = {**timings, "first_token": tracker.first_token}
        timings = {k: round(v, 4) for k, v in timings.items()}
        if NO_ANSWER.rstrip(".").lower() in text.lower() or not passages:
            return Answer(question, NO_ANSWER, [], True, standalone, passages, usage, timings)
        cites = [
            Citation(n, p.doc_id, p.title, p.text, p.score, dict(p.metadata))
            for n, p in enumerate(passages, 1)
            if n in citations.cited(text)
        ]
        return Answer(question, text, cites, False, standalone, passages, usage, timings)

    def documents(self) -> list[Document]:
        """The indexed documents, each rebuilt from its passages, sorted by id."""
        _, texts, metas = self.store.all_passages()
        return documents_from_passages(texts, metas)

    def info(self) -> dict[str, Any]:
        """Where the data lives, what is indexed, and which models are in use."""
        from .ingest import sources
        from .store import embedding_name

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
    from .store import RESERVED

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
            {k: v for k, v in heads[doc_id].items() if k not in RESERVED},
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
