"""Value types shared across the package: documents, their passages, and what could not be read."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


@dataclass(frozen=True)
class Document:
    """One source document: a summary, an abstract, a user's note."""

    doc_id: str
    title: str
    text: str
    source: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def fingerprint(self) -> str:
        """A hash of everything that ends up in the index, to detect edits."""
        # Cached: every passage's id and metadata carry it; hashing the whole text once per
        # passage would make splitting grow with the square of the text's length.
        blob = json.dumps([self.doc_id, self.title, self.text, self.metadata], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Problem:
    """A document that could not be read, and why."""

    source: str
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.message}"


@dataclass(frozen=True)
class Passage:
    """A retrievable piece of a document."""

    passage_id: str
    doc_id: str
    title: str
    text: str
    score: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)
