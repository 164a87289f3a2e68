"""Question answering over ICML 2025 paper summaries, with checked citations."""

from .errors import (
    ChatbotError,
    ConfigError,
    EmbeddingError,
    IngestError,
    ModelError,
    QuestionError,
    StoreError,
)
from .qa import Answer, AnswerStream, Chatbot, Citation
from .settings import Settings

__all__ = [
    "Answer",
    "AnswerStream",
    "Chatbot",
    "ChatbotError",
    "Citation",
    "ConfigError",
    "EmbeddingError",
    "IngestError",
    "ModelError",
    "QuestionError",
    "Settings",
    "StoreError",
]
__version__ = "0.1.0"
