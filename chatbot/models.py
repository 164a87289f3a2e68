"""The model boundary: what the pipeline hands a model, and what it gets back.

Every model takes structured input — the question as asked, the standalone question, the
conversation and the numbered passages with their metadata — and returns a `Reply`: the answer's
text pieces as they stream, and whether the model abstained. A model on an OpenAI-compatible
server gets the prompt files of `prompts/` rendered from that input (`ChatModelAnswerer`); the
offline model reads the input itself (`offline.OfflineModel`) and never sees a prompt.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from .budget import Budget, Fitted, fit
from .errors import ChatbotError, ModelError
from .prompts import NO_ANSWER, escape, format_history, format_passages, load_prompts
from .settings import PROMPTS_DIR, Settings
from .types import Passage

log = logging.getLogger(__name__)

Turn = dict[str, str]  # {"role": "user" | "assistant", "content": ...}


@dataclass(frozen=True)
class CondenseRequest:
    """A follow-up question and the conversation it follows."""

    question: str
    history: tuple[Turn, ...]


@dataclass(frozen=True)
class AnswerRequest:
    """Everything a model answers from: `passages[n - 1]` is passage `[n]`."""

    question: str  # as the user asked it
    standalone: str  # rewritten to stand alone (the question itself without a conversation)
    history: tuple[Turn, ...]
    passages: tuple[Passage, ...]


@dataclass(frozen=True)
class Condensed:
    """A follow-up rewritten to stand alone, and the tokens rewriting it took."""

    question: str
    usage: dict[str, int] = field(default_factory=dict)


class Reply:
    """A model's answer as it streams: iterate for its pieces; `abstained` once they are all in.

    `passages` are the passages the model was shown (a model with a context window may drop the
    lowest-ranked ones to fit); `[n]` in the text refers to `passages[n - 1]`.
    """

    def __init__(
        self,
        pieces: Iterable[str],
        passages: Sequence[Passage],
        *,
        abstained: bool | None = None,
        usage: Callable[[], dict[str, int]] = dict,
        first_token: Callable[[], float | None] = lambda: None,
    ) -> None:
        self._pieces = iter(pieces)
        self._text: list[str] = []
        self._abstained = abstained
        self.passages = tuple(passages)
        self.usage = usage
        self.first_token = first_token

    def __iter__(self) -> Iterator[str]:
        for piece in self._pieces:
            self._text.append(piece)
            yield piece

    def close(self) -> None:
        """Stop the model (a server's stream is closed)."""
        close = getattr(self._pieces, "close", None)
        if close is not None:
            close()

    @property
    def abstained(self) -> bool:
        """Whether the model said the passages do not answer (known once the text is in)."""
        if self._abstained is not None:
            return self._abstained
        return is_no_answer("".join(self._text))


class AnswerModel(Protocol):
    """What the pipeline needs from a model."""

    name: str

    def condense(self, request: CondenseRequest) -> Condensed:
        """The follow-up rewritten to stand alone."""
        ...

    def answer(self, request: AnswerRequest) -> Reply:
        """The answer to `request`, citing its passages as `[n]`."""
        ...


def load_judge_prompt(folder: Path) -> str:
    """`judge.txt` from `folder`, or the package's own when that folder has none."""
    path = folder / "judge.txt"
    if not path.is_file():
        path = PROMPTS_DIR / "judge.txt"
    return path.read_text(encoding="utf-8").strip()


def parse_verdicts(reply: str, count: int) -> list[bool] | None:
    """`count` true/false verdicts from a model's JSON reply, or None when it gives no such list."""
    match = re.search(r"\[[^\[\]]*\]", reply)
    if not match:
        return None
    try:
        verdicts = json.loads(match.group(0))
    except ValueError:
        return None
    if len(verdicts) != count or not all(isinstance(v, bool) for v in verdicts):
        return None
    return verdicts


def is_no_answer(text: str) -> bool:
    """Whether a model's whole reply is the sentence the prompts ask for when nothing answers."""
    words = re.findall(r"\w+", text.lower())
    expected = re.findall(r"\w+", NO_ANSWER.lower())
    return words[: len(expected)] == expected and len(words) <= len(expected) + 3


@dataclass
class ChatModelAnswerer:
    """A LangChain chat model (an OpenAI-compatible server) behind the model boundary.

    Renders the prompt files from the structured request, keeps the prompt within the model's
    context window, counts the tokens it uses and streams its answer.
    """

    llm: BaseChatModel
    settings: Settings
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or self.settings.model_label

    def _tracker(self):
        from .llm import UsageTracker

        return UsageTracker(self.settings.model_name)

    def condense(self, request: CondenseRequest) -> Condensed:
        """Ask the model to rewrite the follow-up with `prompts/condense.txt`."""
        template = ChatPromptTemplate.from_messages(
            [("human", load_prompts(self.settings.prompts_dir).condense)]
        )
        question = escape(request.question)
        # A long conversation loses its oldest turns first to fit the context window.
        fitted = self._fit(
            lambda _, turns: template.format_messages(
                history=format_history(turns), question=question
            ),
            [],
            request.history,
            size=lambda turn: turn["content"],
            keep_passages=0,
        )
        inputs = {"history": format_history(fitted.history), "question": question}
        tracker = self._tracker()
        try:
            chain = template | self.llm | StrOutputParser()
            out = chain.invoke(inputs, config={"callbacks": [tracker]})
        except ChatbotError:
            raise
        except Exception as e:
            raise ModelError(f"The model failed to rewrite the follow-up question: {e}") from e
        question = out.strip().strip('"').strip() or request.question
        return Condensed(question, tracker.usage())

    def answer(self, request: AnswerRequest) -> Reply:
        """Render `prompts/system.txt` and `answer.txt`, fitted to the window, and stream."""
        prompts = load_prompts(self.settings.prompts_dir)
        template = ChatPromptTemplate.from_messages(
            [("system", prompts.system), MessagesPlaceholder("history"), ("human", prompts.answer)]
        )
        kinds = {"user": HumanMessage, "assistant": AIMessage}
        turns = [kinds[t["role"]](escape(t["content"])) for t in request.history]
        fixed = {"question": escape(request.standalone), "no_answer": NO_ANSWER}
        fitted = self._fit(
            lambda ps, ts: template.format_messages(
                passages=format_passages(ps), history=ts, **fixed
            ),
            request.passages,
            turns,
            size=lambda x: x.text if isinstance(x, Passage) else str(x.content),
        )
        messages = template.format_messages(
            passages=format_passages(fitted.passages), history=fitted.history, **fixed
        )
        tracker = self._tracker()
        pieces = self._stream(messages, tracker)
        return Reply(
            pieces, fitted.passages, usage=tracker.usage, first_token=lambda: tracker.first_token
        )

    def _stream(self, messages: list[BaseMessage], tracker) -> Iterator[str]:
        # The model's own stream, not a chain's: closing it (Stop in the web UI) closes the
        # server's HTTP response, where a chain would read its input to the end first.
        try:
            for chunk in self.llm.stream(messages, config={"callbacks": [tracker]}):
                yield chunk.text
        except ChatbotError:
            raise
        except Exception as e:
            raise ModelError(
                f"The model failed to answer ({e}); check CHATBOT_MODEL and OPENAI_BASE_URL, "
                "or use the offline model with --model offline."
            ) from e

    def judge(self, claims: list[tuple[str, list[Passage]]]) -> list[bool] | None:
        """The model's verdict on each (sentence, cited passages), in one call; None if unclear."""
        blocks = []
        for i, (sentence, passages) in enumerate(claims, 1):
            blocks.append(
                f'<statement n="{i}">\n{escape(sentence)}\n</statement>\n'
                f"<passages>\n{format_passages(passages)}\n</passages>"
            )
        prompt = load_judge_prompt(self.settings.prompts_dir).format(statements="\n".join(blocks))
        try:
            reply = self.llm.invoke([HumanMessage(prompt)])
        except ChatbotError as e:
            log.warning("The model could not judge the answer (%s); using the lexical check.", e)
            return None
        return parse_verdicts(str(reply.content), len(claims))

    def _fit(self, render, passages, history, **kwargs: Any) -> Fitted:
        return fit(
            render, list(passages), list(history), Budget.for_settings(self.settings), **kwargs
        )
