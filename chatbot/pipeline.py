"""Answering one question: check → condense → retrieve → fit → generate → cite, as one stream.

`answer_stream` runs the steps in that order; each step is a function of plain values. The model
is asked only when retrieval found relevant passages; the answer's `[n]` markers are checked
against the passages the model was shown, while it streams and once it is done.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from . import citations, support
from .answerable import correct_typos
from .budget import Budget, Fitted, fit
from .errors import ChatbotError, ModelError
from .keyword import asks_for_list
from .options import check_k, check_question, check_where
from .prompts import NO_ANSWER, escape, format_history, format_passages, load_prompts
from .settings import Settings
from .types import Answer, Passage

if TYPE_CHECKING:
    from .llm import UsageTracker
    from .retrieval import Retrieval, Retriever

History = Sequence[dict[str, str]]


class Components(Protocol):
    """What answering needs from the facade; the index is built, and the model made, on demand."""

    settings: Settings

    @property
    def llm(self) -> BaseChatModel: ...

    @property
    def retriever(self) -> Retriever: ...

    def ensure_index(self) -> None: ...


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
    ) -> None:
        self._source = iter(pieces)
        self._finish = finish  # the full text → the Answer (or an error for an empty one)
        self._chunks: list[str] = []
        self._answer: Answer | None = None
        self._error: BaseException | None = None
        self._passages = tuple(passages)
        self._numbers = MappingProxyType(numbers if numbers is not None else {})

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


@dataclass(frozen=True)
class Model:
    """The chat model for one question, and the tracker adding up what its calls cost."""

    llm: BaseChatModel
    settings: Settings
    tracker: UsageTracker | None  # None for a model that counts no tokens

    @classmethod
    def for_question(cls, llm: BaseChatModel, settings: Settings) -> Model:
        """A model whose calls are counted, unless it declares it counts no tokens."""
        if not counts_tokens(llm):
            # Counting would load a tokenizer for a model that has no use for it.
            return cls(llm, settings, None)
        from .llm import UsageTracker

        return cls(llm, settings, UsageTracker(settings.model_name))

    @property
    def config(self) -> dict[str, Any]:
        """The LangChain run config of every call for this question."""
        return {"callbacks": [self.tracker] if self.tracker else []}


@dataclass(frozen=True)
class Prompt:
    """The answer request: its template, the values filling it, and the passages it shows."""

    template: ChatPromptTemplate
    inputs: dict[str, Any]
    passages: list[Passage]  # numbered from 1 in the prompt, best first


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


def counts_tokens(llm: BaseChatModel) -> bool:
    """Whether `llm` has a context window to fit and token usage to count.

    A model without them says so with a class attribute `counts_tokens = False` (the offline
    model); any other model is budgeted and counted.
    """
    return bool(getattr(llm, "counts_tokens", True))


def answer_stream(
    parts: Components,
    question: str,
    history: History | None = None,
    *,
    k: int | None = None,
    where: dict | None = None,
) -> AnswerStream:
    """Answer `question` piece by piece; the stream's `.answer` is set when it ends."""
    history = list(history or [])
    check(question, history, k, where, parts.settings)
    parts.ensure_index()
    clock, model = Clock(), Model.for_question(parts.llm, parts.settings)
    standalone = condense(model, question.strip(), history)
    clock.lap("condense")
    found = retrieve(parts.retriever, standalone, k, where, parts.settings.top_k)
    clock.lap("retrieve")
    finish = partial(
        to_answer, question, standalone, model=model, clock=clock, narrowed=found.narrowed
    )
    if not found.relevant and not getattr(model.llm, "judges_answerability", False):
        # Nothing relevant: say so without asking the model to invent something. The offline
        # model checks on the passages themselves whether they answer, so it is always asked.
        return AnswerStream([NO_ANSWER], partial(finish, passages=found.passages))
    prompt = fit_prompt(model, standalone, found.passages, history)
    numbers: dict[int, int] = {}  # filled while the answer streams
    pieces = clock.timed("generate", generate(model, prompt, numbers))
    return AnswerStream(
        pieces,
        partial(finish, passages=prompt.passages, numbers=numbers),
        passages=prompt.passages,
        numbers=numbers,
    )


def check(question: str, history: History, k: Any, where: Any, settings: Settings) -> None:
    """Raise QuestionError or OptionError for a request that cannot be answered as given."""
    check_question(question, history, settings.max_question_chars)
    check_k(k)
    check_where(where)


def condense(model: Model, question: str, history: History) -> str:
    """The follow-up `question` rewritten to stand alone (as it is without an earlier question)."""
    if not any(t["role"] == "user" for t in history):
        return question
    template = ChatPromptTemplate.from_messages(
        [("human", load_prompts(model.settings.prompts_dir).condense)]
    )
    # A long conversation loses its oldest turns first to fit the context window.
    fitted = _fit(
        model,
        lambda _, turns: template.format_messages(
            history=format_history(turns), question=escape(question)
        ),
        [],
        history,
        size=lambda turn: turn["content"],
        keep_passages=0,
    )
    inputs = {"history": format_history(fitted.history), "question": escape(question)}
    try:
        out = (template | model.llm | StrOutputParser()).invoke(inputs, config=model.config)
    except ChatbotError:
        raise
    except Exception as e:
        raise ModelError(f"The model failed to rewrite the follow-up question: {e}") from e
    return out.strip().strip('"').strip() or question


def retrieve(
    retriever: Retriever, question: str, k: int | None, where: dict | None, top_k: int
) -> Retrieval:
    """The passages for `question`, best first, and whether they are relevant enough."""
    if k is None and asks_for_list(question):
        # A question about several works needs more than the usual handful of passages.
        k = top_k + 3
    # "waht does averagng many modles do" is searched as "what does averaging many models do":
    # read as written, the misspelt words match no passage. Only common English words are put
    # in, so this costs the same on any collection; the model still gets the question as asked.
    return retriever.search(correct_typos(question, set()), k, where)


def fit_prompt(model: Model, question: str, passages: list[Passage], history: History) -> Prompt:
    """The answer request; the lowest-ranked passages, then the oldest turns, go until it fits."""
    prompts = load_prompts(model.settings.prompts_dir)
    template = ChatPromptTemplate.from_messages(
        [("system", prompts.system), MessagesPlaceholder("history"), ("human", prompts.answer)]
    )
    kinds = {"user": HumanMessage, "assistant": AIMessage}
    messages = [kinds[t["role"]](escape(t["content"])) for t in history]
    fixed = {"question": escape(question), "no_answer": NO_ANSWER}
    fitted = _fit(
        model,
        lambda ps, turns: template.format_messages(
            passages=format_passages(ps), history=turns, **fixed
        ),
        passages,
        messages,
        size=lambda x: x.text if isinstance(x, Passage) else str(x.content),
    )
    inputs = {**fixed, "passages": format_passages(fitted.passages), "history": fitted.history}
    return Prompt(template, inputs, fitted.passages)


def _fit(
    model: Model,
    render: Callable[[list[Any], list[Any]], Sequence[BaseMessage]],
    passages: Sequence[Any],
    history: Sequence[Any],
    **kwargs: Any,
) -> Fitted:
    """`budget.fit` for a model with a context window; everything for one without."""
    if not counts_tokens(model.llm):
        return Fitted(list(passages), list(history), 0, 0, 0)
    return fit(render, passages, history, Budget.for_settings(model.settings), **kwargs)


def generate(model: Model, prompt: Prompt, numbers: dict[int, int] | None = None) -> Iterator[str]:
    """The answer's pieces as the model writes them, citing only passages the prompt shows.

    With `numbers`, markers are renumbered 1..m in order of first use, and `numbers` records
    which prompt number each became.
    """
    shown = set(range(1, len(prompt.passages) + 1))
    try:
        # The model's own stream, not a chain's: closing it (Stop in the web UI) closes a model
        # server's HTTP response, where a chain would read its input to the end first.
        messages = prompt.template.format_messages(**prompt.inputs)
        chunks = model.llm.stream(messages, config=model.config)
        yield from citations.clean_stream((c.text for c in chunks), shown, numbers)
    except ChatbotError:
        raise
    except Exception as e:
        raise ModelError(
            f"The model failed to answer ({e}); check CHATBOT_MODEL and OPENAI_BASE_URL, "
            "or use the offline model with --model offline."
        ) from e


def to_answer(
    question: str,
    standalone: str,
    text: str,
    *,
    passages: list[Passage],
    model: Model,
    clock: Clock,
    numbers: dict[int, int] | None = None,
    narrowed: tuple[str, ...] = (),
) -> Answer:
    """The Answer for the model's full `text`: abstained, or citing the passages it names.

    Each sentence is checked against the passages it cites (`Answer.unsupported`), for every
    model: the offline model's verbatim quotes pass at once, a real model's sentences are compared.
    """
    text = text.strip()
    if not text:
        raise ModelError("The model returned an empty answer; try again or another model.")
    tracker = model.tracker
    usage = tracker.usage() if tracker else {}
    timings = clock.timings()
    if tracker and tracker.first_token is not None:
        timings["first_token"] = tracker.first_token
    timings = {k: round(v, 4) for k, v in timings.items()}
    if NO_ANSWER.rstrip(".").lower() in text.lower() or not passages:
        return Answer(
            question, NO_ANSWER, [], True, standalone, passages, usage, timings, (), narrowed
        )
    cites = citations.cite(text, passages, numbers)
    started = time.perf_counter()
    unsupported = support.check_answer(text, passages, numbers)
    timings["check"] = round(time.perf_counter() - started, 4)
    return Answer(
        question, text, cites, False, standalone, passages, usage, timings, unsupported, narrowed
    )
