"""Reading documents (Markdown with front matter, plain text) and splitting them into passages."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

SUFFIXES = (".md", ".markdown", ".txt")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
# Metadata Chroma can store and filter on; anything else is dropped or stringified.
_SCALAR = (str, int, float, bool)


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
        # Cached: every passage's id and metadata carry it, and hashing a large text once per
        # passage made splitting grow with the square of the text.
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


def slugify(text: str) -> str:
    """A stable lowercase id made of letters, digits and dashes."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "document"


def iter_files(paths: Iterable[str | Path]) -> Iterator[Path]:
    """Every readable document under `paths` (files as given, folders searched), sorted."""
    from .records import SUFFIXES as RECORD_SUFFIXES

    wanted = SUFFIXES + RECORD_SUFFIXES
    for path in map(Path, paths):
        if path.is_dir():
            yield from sorted(
                p for p in path.rglob("*") if p.suffix.lower() in wanted and p.is_file()
            )
        else:
            yield path


def read_document(path: Path) -> Document:
    """Parse one file; raises ValueError with a short reason when it cannot be used."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ValueError(f"cannot be read ({e.strerror or e})") from e
    try:
        content = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"is not UTF-8 text (bad byte at position {e.start}); re-save it as UTF-8"
        ) from e
    meta: dict[str, Any] = {}
    body = content
    if content.lstrip("\ufeff").startswith("---"):
        match = _FRONT_MATTER.match(content)
        if not match:
            raise ValueError("front matter opened with '---' is never closed by a '---' line")
        try:
            loaded = yaml.safe_load(match.group(1))
        except yaml.YAMLError as e:
            raise ValueError(f"front matter is not valid YAML ({_yaml_reason(e)})") from e
        if loaded is not None and not isinstance(loaded, dict):
            raise ValueError("front matter must be 'key: value' lines")
        meta = dict(loaded or {})
        body = content[match.end() :]
    text = body.strip()
    if not text:
        raise ValueError("is empty: it has no text to index")
    doc_id = str(meta.pop("id", "") or slugify(path.stem)).strip()
    title = str(meta.pop("title", "") or _title_from(path, text)).strip()
    if "link" in meta and "url" not in meta:
        meta["url"] = meta.pop("link")
    return Document(doc_id, title, text, str(path), clean_metadata(meta))


def _yaml_reason(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or "syntax error"
    return f"{problem} at line {mark.line + 2}" if mark else str(problem)


def _title_from(path: Path, text: str) -> str:
    first = text.splitlines()[0].lstrip("# ").strip()
    if path.suffix.lower() != ".txt" and len(first) <= 120:
        return first
    return path.stem.replace("_", " ").replace("-", " ").strip().capitalize()


def clean_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """Metadata Chroma accepts: scalars as they are, lists of scalars joined, the rest as JSON."""
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if value is None or value == "" or value == []:
            continue
        if isinstance(value, _SCALAR):
            out[str(key)] = value
        elif isinstance(value, list) and all(isinstance(v, _SCALAR) for v in value):
            out[str(key)] = ", ".join(map(str, value))
        else:
            out[str(key)] = json.dumps(value, default=str)
    return out


def load_documents(
    paths: Iterable[str | Path], fields: Any = None
) -> tuple[list[Document], list[Problem]]:
    """Read every document under `paths`; bad files become Problems, the rest are returned.

    JSON Lines files hold one document a line; `fields` (a records.Fields) names their fields.
    """
    from .records import is_records_file, read_records

    docs: list[Document] = []
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    for path in iter_files(paths):
        if not path.exists():
            problems.append(Problem(str(path), "does not exist"))
            continue
        if is_records_file(path):
            found, bad = read_records(path, fields)
            problems.extend(bad)
        else:
            try:
                found = [read_document(path)]
            except ValueError as e:
                problems.append(Problem(str(path), str(e)))
                continue
        for doc in found:
            if doc.doc_id in seen:
                problems.append(
                    Problem(
                        doc.source,
                        f"id {doc.doc_id!r} is already used by {seen[doc.doc_id]}; "
                        "give it its own id",
                    )
                )
                continue
            seen[doc.doc_id] = str(path)
            docs.append(doc)
    return docs, problems


class Splitter:
    """Token-aware splitting (cl100k_base, offline) into overlapping passages."""

    def __init__(self, chunk_tokens: int = 200, chunk_overlap: int = 30) -> None:
        self.chunk_tokens = chunk_tokens
        self.chunk_overlap = chunk_overlap

    @cached_property
    def _splitter(self):
        # Built on first use: an unchanged corpus is never split, so it never loads tiktoken.
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        from .tokens import ENCODING, install_offline_encoding

        install_offline_encoding()
        return RecursiveCharacterTextSplitter.from_tiktoken_encoder(
            encoding_name=ENCODING,
            chunk_size=self.chunk_tokens,
            chunk_overlap=self.chunk_overlap,
            separators=["\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ", ""],
            keep_separator="end",
        )

    def split(self, doc: Document) -> list[Passage]:
        """The passages of `doc`, each with an id derived from its content."""
        chunks = [c.strip() for c in self._splitter.split_text(doc.text) if c.strip()]
        passages = []
        for i, chunk in enumerate(chunks):
            key = hashlib.sha256(f"{doc.doc_id}\n{i}\n{doc.fingerprint}\n{chunk}".encode())
            passages.append(
                Passage(
                    passage_id=key.hexdigest()[:32],
                    doc_id=doc.doc_id,
                    title=doc.title,
                    text=chunk,
                    metadata=dict(doc.metadata),
                )
            )
        return passages
