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
        KeywordIndexError,
        ModelError,
        OptionError,
        QuestionError,
        StoreDamagedError,
        StoreError,
        StoreReadOnlyError,
    )
    from .ingest import IngestReport
    from .options import parse_where
    from .pipeline import AnswerStream
    from .qa import Chatbot
    from .records import Fields
    from .retrieval import ChatbotRetriever
    from .settings import Settings
    from .types import Answer, Citation, Document, Passage, Problem, Support, Unsupported

# Imported on first use: the embedding child process imports `chatbot.embeddings` and would
# otherwise pay 2 s for LangChain's chat-model modules it never uses.
# Every type a public method returns or raises is here, so callers and type checkers name them
# from `chatbot` alone.
_EXPORTS = {
    "AnswerStream": ".pipeline",
    "Chatbot": ".qa",
    "ChatbotRetriever": ".retrieval",
    "Fields": ".records",
    "IngestReport": ".ingest",
    "Settings": ".settings",
    "parse_where": ".options",
    **dict.fromkeys(
        ["Answer", "Citation", "Document", "Passage", "Problem", "Support", "Unsupported"],
        ".types",
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
