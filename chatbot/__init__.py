"""Question answering over ICML 2025 paper summaries, with checked citations."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import (
        ChatbotError,
        ConfigError,
        EmbeddingError,
        EmptyIndexError,
        IngestError,
        ModelError,
        QuestionError,
        StoreError,
    )
    from .options import parse_where
    from .pipeline import AnswerStream
    from .qa import Chatbot
    from .records import Fields
    from .settings import Settings
    from .types import Answer, Citation, Support, Unsupported

# Imported on first use: the embedding child process imports `chatbot.embeddings` and would
# otherwise pay 2 s for LangChain's chat-model modules it never uses.
_EXPORTS = {
    "Answer": ".types",
    "AnswerStream": ".pipeline",
    "Chatbot": ".qa",
    "Citation": ".types",
    "Fields": ".records",
    "Settings": ".settings",
    "Support": ".types",
    "Unsupported": ".types",
    "parse_where": ".options",
    **dict.fromkeys(
        [
            "ChatbotError",
            "ConfigError",
            "EmbeddingError",
            "EmptyIndexError",
            "IngestError",
            "ModelError",
            "QuestionError",
            "StoreError",
        ],
        ".errors",
    ),
}

__all__ = [
    "Answer",
    "AnswerStream",
    "Chatbot",
    "ChatbotError",
    "Citation",
    "ConfigError",
    "EmbeddingError",
    "EmptyIndexError",
    "Fields",
    "IngestError",
    "ModelError",
    "QuestionError",
    "Settings",
    "StoreError",
    "Support",
    "Unsupported",
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
