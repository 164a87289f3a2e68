"""Question answering over ICML 2025 paper summaries, with checked citations."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chatbot.answer.pipeline import AnswerStream
    from chatbot.chatbot import Chatbot
    from chatbot.errors import (
        ChatbotError,
        ConfigError,
        EmbeddingError,
        EmptyIndexError,
        IngestError,
        KeywordIndexError,
        ModelError,
        OptionError,
        QuestionError,
        StoreDamagedError,
        StoreError,
        StoreReadOnlyError,
    )
    from chatbot.index.records import Fields
    from chatbot.index.sync import IngestReport
    from chatbot.retrieve.filters import parse_where
    from chatbot.retrieve.hybrid import ChatbotRetriever
    from chatbot.settings import Settings
    from chatbot.values import Answer, Citation, Document, Passage, Problem, Support, Unsupported

# Imported on first use: the embedding child process imports `chatbot.index.embeddings` and
# would otherwise pay 2 s for LangChain's chat-model modules it never uses.
# Every type a public method returns or raises is here, so callers and type checkers name them
# from `chatbot` alone.
_EXPORTS = {
    "AnswerStream": ".answer.pipeline",
    "Chatbot": ".chatbot",
    "ChatbotRetriever": ".retrieve.hybrid",
    "Fields": ".index.records",
    "IngestReport": ".index.sync",
    "Settings": ".settings",
    "parse_where": ".retrieve.filters",
    **dict.fromkeys(
        ["Answer", "Citation", "Document", "Passage", "Problem", "Support", "Unsupported"],
        ".values",
    ),
    **dict.fromkeys(
        [
            "ChatbotError",
            "ConfigError",
            "EmbeddingError",
            "EmptyIndexError",
            "IngestError",
            "KeywordIndexError",
            "ModelError",
            "OptionError",
            "QuestionError",
            "StoreDamagedError",
            "StoreError",
            "StoreReadOnlyError",
        ],
        ".errors",
    ),
}

__all__ = [
    "Answer",
    "AnswerStream",
    "Chatbot",
    "ChatbotError",
    "ChatbotRetriever",
    "Citation",
    "ConfigError",
    "Document",
    "EmbeddingError",
    "EmptyIndexError",
    "Fields",
    "IngestError",
    "IngestReport",
    "KeywordIndexError",
    "ModelError",
    "OptionError",
    "Passage",
    "Problem",
    "QuestionError",
    "Settings",
    "StoreDamagedError",
    "StoreError",
    "StoreReadOnlyError",
    "Support",
    "Unsupported",
    "__version__",
    "parse_where",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
