"""The package's errors: one base class, each message naming the cause and the fix."""

from __future__ import annotations


class ChatbotError(Exception):
    """Base class for every error this package raises on purpose."""


class ConfigError(ChatbotError):
    """A setting is missing or wrong, or a required component is not installed."""


class QuestionError(ChatbotError, ValueError):
    """The question itself cannot be asked (empty, too long)."""


class IngestError(ChatbotError):
    """One or more documents could not be ingested."""


class StoreError(ChatbotError):
    """The index (Chroma store or keyword index) cannot be used."""


class EmbeddingError(ChatbotError):
    """The embedding model could not be loaded or failed to embed."""


class ModelError(ChatbotError):
    """The language model failed to give a usable answer."""


class EmptyIndexError(StoreError):
    """There is nothing to search; the message names the command that fills the index."""


class KeywordIndexError(StoreError):
    """The keyword index on disk cannot be read; it is rebuilt from the store."""


class StoreDamagedError(StoreError):
    """The Chroma database is damaged; `chatbot ingest --rebuild` moves it aside."""


class StoreReadOnlyError(StoreError):
    """The data directory cannot be written, and the store needs to write to it."""


class OptionError(ConfigError, ValueError):
    """An option of a question or search (`k`, a `where` filter) is out of range or malformed."""
