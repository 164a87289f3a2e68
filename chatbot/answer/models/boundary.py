"""The model boundary: what the pipeline hands a model, and what it gets back.

Every model takes structured input — the question as asked, the standalone question, the
conversation and the numbered passages with their metadata — and returns a `Reply`: the answer's
text pieces as they stream, and whether the model abstained. A model on an OpenAI-compatible
server gets the prompt files of `prompts/` rendered from that input (`ChatModelAnswerer`); the
offline model reads the input itself (`offline.OfflineModel`) and never sees a prompt.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from chatbot.answer.prompts import NO_ANSWER
from chatbot.values import Passage

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


def is_no_answer(text: str) -> bool:
    """Whether a model's whole reply is the sentence the prompts ask for when nothing answers."""
    words = re.findall(r"\w+", text.lower())
    expected = re.findall(r"\w+", NO_ANSWER.lower())
    return words[: len(expected)] == expected and len(words) <= len(expected) + 3
