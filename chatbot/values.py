"""Value types shared across the package: documents, passages, problems, answers, citations
and support checks."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
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
    # Where each page starts in `text` (page 1 at pages[0]), for documents with pages (PDFs);
    # and where each section starts, with its heading. Passages take theirs from these.
    pages: tuple[int, ...] = ()
    sections: tuple[tuple[int, str], ...] = ()

    @cached_property
    def fingerprint(self) -> str:
        """A hash of everything that ends up in the index, to detect edits."""
        # Cached: every passage's id and metadata carry it; hashing the whole text once per
        # passage would make splitting grow with the square of the text's length.
        parts: list[Any] = [self.doc_id, self.title, self.text, self.metadata]
        if self.pages:
            # Only when there are pages: the fingerprints of other documents stay as they were.
            parts += [self.pages, self.sections]
        blob = json.dumps(parts, sort_keys=True)
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


@dataclass(frozen=True)
class Citation:
    """A passage the answer cites as `[n]`, and the sentence(s) of it that support the answer."""

    n: int
    doc_id: str
    title: str
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)
    # The supporting sentence(s) of `text`, joined by a space; `spans` are their `(start, end)`
    # offsets in `text`, in order. Empty when no sentence of the passage matches the answer.
    quote: str = ""
    spans: tuple[tuple[int, int], ...] = ()
    # Which of `spans` back which sentence of the answer: for each sentence citing this passage,
    # where it starts in `Answer.text` and the indices in `spans` of the sentence(s) backing it.
    backing: tuple[tuple[int, tuple[int, ...]], ...] = ()

    @property
    def url(self) -> str | None:
        """Link to the paper, when the document has one."""
        return self.metadata.get("url")

    @property
    def page(self) -> str | None:
        """The PDF page the quote (or the passage) is on: "4", or "4-5" when it spans two."""
        first, last = self.metadata.get("page"), self.metadata.get("page_end")
        if first is None:
            return None
        if last in (None, first):
            return str(first)
        cut = self.metadata.get("page_break")
        if self.spans and isinstance(cut, int):
            # A passage across a page break: the supporting sentences say which page it is.
            if all(end <= cut for _, end in self.spans):
                return str(first)
            if all(start >= cut for start, _ in self.spans):
                return str(last)
        return f"{first}-{last}"

    @property
    def section(self) -> str | None:
        """The heading of the section the passage is in, when the document has headings."""
        return self.metadata.get("section")

    @property
    def paper(self) -> str | None:
        """The paper's own title, when known."""
        return self.metadata.get("paper")

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape used by the CLI and the UI."""
        return {
            "n": self.n,
            "doc_id": self.doc_id,
            "title": self.title,
            "text": self.text,
            "score": self.score,
            "paper": self.paper,
            "url": self.url,
            "page": self.page,
            "section": self.section,
            # Who wrote the cited record and where it appeared (None for documents without them).
            "authors": self.metadata.get("authors"),
            "year": self.metadata.get("year"),
            "venue": self.metadata.get("venue"),
            "quote": self.quote,
            "spans": [list(span) for span in self.spans],
            "backing": [[start, list(picked)] for start, picked in self.backing],
        }


@dataclass(frozen=True)
class Support:
    """How well a passage supports a claim: `supported` when `score` reaches the threshold."""

    supported: bool
    score: float  # 0..1
    quote: str  # the passage sentence(s) that best support the claim, verbatim


@dataclass(frozen=True)
class Unsupported:
    """A sentence of an answer that its cited passages do not support, or that cites nothing."""

    sentence: str
    start: int  # offsets of `sentence` in `Answer.text`
    end: int
    # "not_found": the passages it cites do not support it; "uncited": it states something
    # but cites no passage.
    reason: str
    numbers: tuple[int, ...]  # the [n] it cites, as shown in the answer
    score: float  # best support score among its cited passages, 0 when it cites none

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape used by the CLI and the UI: every field, `numbers` as a list."""
        return {**asdict(self), "numbers": list(self.numbers)}


@dataclass(frozen=True)
class Answer:
    """An answer with the passages it cites, and how it was produced."""

    question: str
    text: str
    citations: list[Citation]
    abstained: bool
    standalone_question: str
    passages: list[Passage] = field(default_factory=list)  # shown to the model, best first
    usage: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    # Sentences not supported by the passages they cite, or stating something uncited.
    unsupported: tuple[Unsupported, ...] = ()
    # How the question narrowed the search ("authors: Hu Ding", "year = 2021"), as `where` does.
    narrowed: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape `chatbot ask --json` prints: answer, abstained, citations, unsupported
        sentences, and how the question narrowed the search."""
        return {
            "answer": self.text,
            "abstained": self.abstained,
            "citations": [c.to_dict() for c in self.citations],
            "unsupported": [u.to_dict() for u in self.unsupported],
            "narrowed": list(self.narrowed),
        }
