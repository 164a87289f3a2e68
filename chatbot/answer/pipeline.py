"""Answering one question: check → condense → retrieve → answer → cite and check, as a stream.

`answer_stream` runs the steps in that order. The model gets structured input
(`models/boundary.py`) and is asked only when retrieval found passages plausibly related to the
question; the answer's `[n]` markers are checked against the passages the model was shown, while
it streams and once it is done, and one evidence step finds each cited sentence's support
(`verify/support.py`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from chatbot.answer import citations
from chatbot.answer.models.boundary import (
    AnswerModel,
    AnswerRequest,
    CondenseRequest,
    Reply,
    is_no_answer,
)
from chatbot.answer.prompts import NO_ANSWER
from chatbot.errors import ModelError, QuestionError
from chatbot.index.embeddings.minilm import vocabulary_words
from chatbot.retrieve.filters import check_k, check_where
from chatbot.settings import Settings
from chatbot.text.terms import asks_for_list, reads_as_english, respell, word_counts
from chatbot.values import Answer, Passage
from chatbot.verify.support import Evidence

if TYPE_CHECKING:
    from chatbot.retrieve.hybrid import Retrieval, Retriever

History = Sequence[dict[str, str]]

# Lone surrogates: how Python keeps the bytes of input that was not valid UTF-8.
_UNDECODED = re.compile("[\ud800-\udfff]")


def check_question(question: Any, history: Any, max_chars: int) -> None:
    """Raise QuestionError for an empty or over-long question, or a malformed history turn."""
    if not isinstance(question, str):
        raise QuestionError(
            f"The question must be text (a str), not {type(question).__name__}: pass it as a "
            "string."
        )
    if not question.strip():
        raise QuestionError("The question is empty: type a question about the papers.")
    if len(question) > max_chars:
        raise QuestionError(
            f"Your question is {len(question)} characters long; the limit is {max_chars} "
            "characters. Please shorten it."
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


class Components(Protocol):
    """What answering needs from the facade; the index is built, and the model made, on demand."""

    settings: Settings

    @property
    def model(self) -> AnswerModel: ...

    @property
    def retriever(self) -> Retriever: ...

    def ensure_index(self) -> None: ...

    def check_answer(
        self, text: str, passages: Sequence[Passage], numbers: dict[int, int] | None, *, model
    ) -> Evidence: ...


class AnswerStream:
    """The answer as the model writes it: iterate for its text pieces; `.answer` once all are in.

    Like simonw/llm's `Response`: iterating runs the model, iterating again replays the pieces,
    `result()` reads to the end. `.answer` is None until the last piece has arrived, and stays
    None when the model fails on the way: a cut-off reply is never an answer.
    """

    def __init__(
        self,
        pieces: Iterable[str],
        finish: Callable[[str], Answer],
        *,
        passages: Sequence[Passage] = (),
        numbers: dict[int, int] | None = None,
        close: Callable[[], None] | None = None,
    ) -> None:
        self._source = iter(pieces)
        self._finish = finish  # the full text → the Answer (or an error for an empty one)
        self._chunks: list[str] = []
        self._answer: Answer | None = None
        self._error: BaseException | None = None
        self._passages = tuple(passages)
        self._numbers = MappingProxyType(numbers if numbers is not None else {})
        self._close = close

    @property
    def passages(self) -> tuple[Passage, ...]:
        """The passages the model is shown, in prompt order: prompt `[n]` is `passages[n - 1]`.

        Known as soon as the stream is returned, before the first piece: a UI can show the
        candidate sources at once. Empty when nothing relevant was found and the model is not asked.
        """
        return self._passages

    @property
    def numbers(self) -> Mapping[int, int]:
        """Prompt number → the answer's number, for every marker streamed so far (read-only).

        It grows as markers first appear, so a `[n]` already streamed leads to
        `passages[prompt_n - 1]`; the final `Answer.citations` use the same numbers.
        """
        return self._numbers

    def __iter__(self) -> Iterator[str]:
        if self._answer is not None:
            yield from self._chunks
            return
        if self._error is not None:
            raise self._error
        try:
            for piece in self._source:
                self._chunks.append(piece)
                yield piece
            self._answer = self._finish("".join(self._chunks))
        except GeneratorExit:
            raise  # the caller stopped reading; a later iteration goes on from here
        except BaseException as e:
            self._error = e
            raise

    def close(self) -> None:
        """Stop reading: the model's stream (a model server's HTTP response) is closed."""
        close = getattr(self._source, "close", None)
        if close is not None:
            close()
        if self._close is not None:
            self._close()

    @property
    def answer(self) -> Answer | None:
        """The full Answer once the stream has ended, else None."""
        return self._answer

    def result(self) -> Answer:
        """Read the stream to its end; the Answer."""
        for _ in self:
            pass
        assert self._answer is not None
        return self._answer

    def text(self) -> str:
        """Read the stream to its end; the answer's text."""
        return self.result().text


class Clock:
    """Seconds spent in each step of one question."""

    def __init__(self) -> None:
        self.started = self._last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, step: str) -> None:
        """Record the time since the previous lap (or the start) as `step`'s."""
        now = time.perf_counter()
        self.laps[step], self._last = now - self._last, now

    def timed(self, step: str, pieces: Iterable[str]) -> Iterator[str]:
        """`pieces`, recording as `step` the time from the first request to the last piece."""
        start = time.perf_counter()
        yield from pieces
        self.laps[step] = time.perf_counter() - start

    def timings(self) -> dict[str, float]:
        """Every lap, and the total so far."""
        return {**self.laps, "total": time.perf_counter() - self.started}


def answer_stream(
    parts: Components,
    question: str,
    history: History | None = None,
    *,
    k: int | None = None,
    where: dict | None = None,
) -> AnswerStream:
    """Answer `question` piece by piece; the stream's `.answer` is set when it ends."""
    history = tuple(history or ())
    check(question, history, k, where, parts.settings)
    parts.ensure_index()
    clock, model, question = Clock(), parts.model, question.strip()
    standalone, usage = question, {}
    if any(t["role"] == "user" for t in history):
        condensed = model.condense(CondenseRequest(question, history))
        standalone, usage = condensed.question, dict(condensed.usage)
    clock.lap("condense")
    found = retrieve(parts.retriever, standalone, k, where, parts.settings.top_k)
    # The relevance floor is an English one: it holds back only an English question.
    floored = not found.relevant and reads_as_english(standalone, vocabulary_words())
    if floored:
        # Slips of the keyboard can hide every related passage: read them as the words of the
        # passages found, and search once more.
        words = word_counts(f"{p.title} {p.text}" for p in found.passages)
        respelled = respell(standalone, words, vocabulary_words())
        if respelled != standalone:
            found = retrieve(parts.retriever, respelled, k, where, parts.settings.top_k)
    clock.lap("retrieve")
    finish = partial(to_answer, question, standalone, clock=clock, narrowed=found.narrowed)
    if floored and not found.relevant:
        # Nothing retrieved is even related: say so without asking the model to invent something.
        # The floor is an English one: a question in another language goes to the model, which
        # answers in that language or says what it cannot read.
        return AnswerStream(
            [NO_ANSWER],
            partial(finish, reply=None, passages=found.passages, usage=usage, check=None),
        )
    reply = model.answer(AnswerRequest(question, standalone, history, tuple(found.passages)))
    shown = set(range(1, len(reply.passages) + 1))
    numbers: dict[int, int] = {}  # filled while the answer streams
    pieces = clock.timed("generate", citations.clean_stream(reply, shown, numbers))
    return AnswerStream(
        pieces,
        partial(
            finish,
            reply=reply,
            passages=list(reply.passages),
            usage=usage,
            numbers=numbers,
            check=partial(parts.check_answer, model=model),
        ),
        passages=reply.passages,
        numbers=numbers,
        close=reply.close,
    )


def check(question: str, history: History, k: Any, where: Any, settings: Settings) -> None:
    """Raise QuestionError or OptionError for a request that cannot be answered as given."""
    check_question(question, history, settings.max_question_chars)
    check_k(k)
    check_where(where)


def retrieve(
    retriever: Retriever, question: str, k: int | None, where: dict | None, top_k: int
) -> Retrieval:
    """The passages for `question`, best first, and whether they are relevant enough."""
    if k is None and asks_for_list(question):
        # A question about several works needs more than the usual handful of passages.
        k = top_k + 3
    return retriever.search(question, k, where)


def to_answer(
    question: str,
    standalone: str,
    text: str,
    *,
    reply: Reply | None,
    passages: list[Passage],
    usage: dict[str, int],
    clock: Clock,
    check: Callable[..., Evidence] | None,
    numbers: dict[int, int] | None = None,
    narrowed: tuple[str, ...] = (),
) -> Answer:
    """The Answer for the model's full `text`: abstained, or citing the passages it names.

    Each sentence is checked against the passages it cites (`Answer.unsupported`) by the one
    evidence step that also finds each citation's supporting sentences.
    """
    text = text.strip()
    if not text:
        raise ModelError("The model returned an empty answer; try again or another model.")
    if reply is not None:
        for key, value in reply.usage().items():
            usage[key] = usage.get(key, 0) + value
    timings = clock.timings()
    first = reply.first_token() if reply is not None else None
    if first is not None:
        timings["first_token"] = first
    timings = {key: round(v, 4) for key, v in timings.items()}
    if reply is None or reply.abstained or not passages or check is None:
        shown = NO_ANSWER if reply is None or is_no_answer(text) else text
        return Answer(question, shown, [], True, standalone, passages, usage, timings, (), narrowed)
    started = time.perf_counter()
    found = check(text, passages, numbers)
    timings["check"] = round(time.perf_counter() - started, 4)
    return Answer(
        question,
        text,
        citations.cite(text, passages, numbers, found.spans, found.backing),
        False,
        standalone,
        passages,
        usage,
        timings,
        found.unsupported,
        narrowed,
    )
