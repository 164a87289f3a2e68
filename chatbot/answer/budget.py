"""Token budget: the prompt fits the model's context window, with room kept for the answer."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Generic, TypeVar

from langchain_core.messages import BaseMessage

from chatbot.errors import ConfigError
from chatbot.settings import Settings
from chatbot.text.tokens import ENCODING, count_tokens

log = logging.getLogger(__name__)

T = TypeVar("T")
P = TypeVar("P")

DEFAULT_WINDOW = 8192
# Context windows of common models, matched by the longest prefix of the lower-case name (with
# any "org/" prefix and ":tag" suffix removed, as vLLM and Ollama write them).
KNOWN_WINDOWS = {
    "offline": 1_000_000,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4-32k": 32_768,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4": 200_000,
    "llama3.1": 131_072,
    "llama3.2": 131_072,
    "llama3.3": 131_072,
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama-3.3": 131_072,
    "llama3": 8_192,
    "meta-llama-3": 8_192,
    "llama-3": 8_192,
    "mistral": 32_768,
    "mixtral": 32_768,
    "qwen2.5": 32_768,
    "qwen3": 32_768,
    "gemma2": 8_192,
    "gemma-2": 8_192,
    "gemma3": 131_072,
    "gemma-3": 131_072,
    "phi3": 4_096,
    "phi-3": 4_096,
    "phi4": 16_384,
    "phi-4": 16_384,
    "deepseek-r1": 131_072,
}
# Per-message overhead of the chat format (role and separators), and of priming the reply.
MESSAGE_TOKENS = 4
REPLY_TOKENS = 3
# Other tokenizers than cl100k can need more tokens for the same text: keep a margin.
UNKNOWN_ENCODING_MARGIN = 0.9


def context_window(model: str, override: int | None = None) -> int:
    """The model's context window: the override, a known window, or DEFAULT_WINDOW."""
    if override:
        return override
    name = re.sub(r":.*$", "", model.strip().lower().rsplit("/", 1)[-1])
    best = max((p for p in KNOWN_WINDOWS if name.startswith(p)), key=len, default=None)
    return KNOWN_WINDOWS[best] if best else DEFAULT_WINDOW


@lru_cache(maxsize=32)
def _exact_encoding(model: str) -> bool:
    """Whether cl100k is the model's own encoding; if tiktoken does not know it, log so once."""
    import tiktoken

    try:
        # A known model with another encoding (gpt-4o) is reported by `tokens.encoding_for`.
        return tiktoken.encoding_name_for_model(model) == ENCODING
    except KeyError:
        if model != "offline":
            # Not a warning: for non-OpenAI models an estimate is all there is, offline or not.
            log.info(
                "The tokenizer of %s is not available offline; counting its tokens with %s "
                "and keeping %d%% of the context window free as a margin.",
                model,
                ENCODING,
                round(100 * (1 - UNKNOWN_ENCODING_MARGIN)),
            )
        return False


@dataclass(frozen=True)
class Budget:
    """How many prompt tokens a model call may use."""

    model: str
    window: int
    reserve: int  # kept free for the answer
    limit: int  # for the prompt

    @classmethod
    def for_settings(cls, settings: Settings) -> Budget:
        """The budget of the configured model (CHATBOT_CONTEXT_WINDOW wins over known windows)."""
        model = settings.model_name
        window = context_window(model, settings.context_window)
        reserve = settings.max_answer_tokens
        limit = window - reserve
        if not settings.context_window and not _exact_encoding(model):
            # Counting is an estimate for this model: leave room for the difference.
            limit = int(limit * UNKNOWN_ENCODING_MARGIN)
        if limit < 100:
            raise ConfigError(
                f"The context window of {model} ({window} tokens) leaves {max(limit, 0)} tokens "
                f"for the prompt after keeping {reserve} for the answer: raise "
                "CHATBOT_CONTEXT_WINDOW or lower CHATBOT_MAX_ANSWER_TOKENS."
            )
        return cls(model, window, reserve, limit)


def count_messages(messages: Sequence[BaseMessage], model: str | None = None) -> int:
    """Prompt tokens of a chat request made of `messages`."""
    return REPLY_TOKENS + sum(
        MESSAGE_TOKENS + count_tokens(_text(m.content), model) for m in messages
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(str(c.get("text", "")) if isinstance(c, dict) else str(c) for c in content)


@dataclass(frozen=True)
class Fitted(Generic[P, T]):
    """What fits: the best passages and the latest turns, and the prompt's size in tokens."""

    passages: list[P]
    history: list[T]
    tokens: int
    dropped_passages: int
    dropped_turns: int


def fit(
    render: Callable[[list[P], list[T]], Sequence[BaseMessage]],
    passages: Sequence[P],
    history: Sequence[T],
    budget: Budget,
    *,
    size: Callable[[P | T], str] = str,
    keep_passages: int = 1,
) -> Fitted[P, T]:
    """Drop the lowest-ranked passages, then the oldest turns, until `render(...)` fits.

    `render(passages, history)` builds the request; `size(item)` gives text that is part of an
    item's share of it (a lower bound, used to guess how many to drop before measuring again).
    At least `keep_passages` passages stay; if even that does not fit, a ConfigError says so.
    Not LangChain's `trim_messages`: it drops whole messages, but passages are text inside the
    last message, and the condense prompt holds the conversation as text of one message too.
    """
    passages, history = list(passages), list(history)
    p, h = len(passages), 0
    while True:
        tokens = count_messages(render(passages[:p], history[h:]), budget.model)
        if tokens <= budget.limit:
            if p < len(passages) or h:
                log.info(
                    "Prompt for %s trimmed to %d tokens (limit %d): left out %d passage(s) "
                    "and %d earlier turn(s).",
                    budget.model,
                    tokens,
                    budget.limit,
                    len(passages) - p,
                    h,
                )
            return Fitted(passages[:p], history[h:], tokens, len(passages) - p, h)
        over, before = tokens - budget.limit, (p, h)
        while over > 0 and (p > keep_passages or h < len(history)):
            if p > keep_passages:
                p -= 1
                over -= count_tokens(size(passages[p]), budget.model)
            else:
                over -= MESSAGE_TOKENS + count_tokens(size(history[h]), budget.model)
                h += 1
        if (p, h) == before:
            raise ConfigError(
                f"The question with the best passage needs {tokens} tokens, more than the "
                f"{budget.limit} that fit in the context window of {budget.model} "
                f"({budget.window} tokens, {budget.reserve} kept for the answer): raise "
                "CHATBOT_CONTEXT_WINDOW, lower CHATBOT_MAX_ANSWER_TOKENS or ask a shorter question."
            )
