"""Collections of records: JSON Lines files, one document a line (e.g. conference abstracts)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chatbot.values import Document, Problem

SUFFIXES = (".jsonl", ".ndjson")
MB = 1024 * 1024
# Metadata Chroma can store and filter on; anything else is dropped or stringified.
_SCALAR = (str, int, float, bool)
# A character that carries text: not whitespace, not a C0/C1 control (NUL included), not an
# invisible format character. A document without one is empty, however many bytes it has.
_CONTENT = re.compile(r"[^\s\x00-\x1f\x7f-\x9f\xad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
# A record's source is "<absolute file path>#<record id>": ingest can tell which file it came from
# and remove the records a later version of that file no longer holds.
_RECORD_SOURCE = re.compile(r"^(.*\.(?:jsonl|ndjson))#.+$", re.IGNORECASE)


@dataclass(frozen=True)
class Fields:
    """Which field of a record holds its id, title and text; every other field is metadata."""

    id: str = "id"
    title: str = "title"
    text: str = "text"


def has_text(text: str) -> bool:
    """True when `text` holds something besides whitespace, NUL bytes and control characters."""
    return _CONTENT.search(text) is not None


def too_large(size: int, max_bytes: int | None) -> str:
    """Why a document of `size` bytes is refused, or "" when it is within `max_bytes`."""
    if not max_bytes or size <= max_bytes:
        return ""
    return (
        f"is {size / MB:.1f} MB, over the {max_bytes / MB:g} MB limit: split it into smaller "
        "files, or raise CHATBOT_MAX_FILE_MB"
    )


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


def is_records_file(path: Path) -> bool:
    """True for files read as one record a line."""
    return path.suffix.lower() in SUFFIXES


def source_file(source: str) -> str:
    """The file a document came from: `source` itself, or the file part of a record's source."""
    match = _RECORD_SOURCE.match(source)
    return match.group(1) if match else source


def _scalar_text(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value if v is not None)
    return "" if value is None else str(value)


def json_objects(lines: list[str], path: Path) -> Iterator[tuple[int, str, dict | None, str]]:
    """(line number, "PATH line N", the object or None, why not) for each non-blank line."""
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path} line {n}"
        try:
            obj = json.loads(line)
        except ValueError as e:
            yield n, where, None, f"is not valid JSON ({e.msg} at column {e.colno})"
            continue
        if not isinstance(obj, dict):
            yield n, where, None, "is not a JSON object"
            continue
        yield n, where, obj, ""


def read_records(
    path: Path, fields: Fields | None = None, max_bytes: int | None = None
) -> tuple[list[Document], list[Problem]]:
    """Each valid line of `path` as a Document; bad lines become Problems naming the line.

    The size limit `max_bytes` applies to each record's text: the file is a collection.
    """
    fields = fields or Fields()
    file = path.resolve()
    try:
        lines = file.read_text(encoding="utf-8-sig").splitlines()
    except OSError as e:
        return [], [Problem(str(path), f"cannot be read ({e.strerror or e})")]
    except UnicodeDecodeError as e:
        return [], [Problem(str(path), f"is not UTF-8 text (bad byte at position {e.start})")]
    docs: list[Document] = []
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for n, where, record, why in json_objects(lines, path):
        if record is None:
            problems.append(Problem(where, why))
            continue
        raw_id = record.get(fields.id)
        if isinstance(raw_id, bool) or not isinstance(raw_id, str | int | float | type(None)):
            kind = {dict: "an object", list: "a list", bool: "true/false"}.get(type(raw_id), "")
            problems.append(
                Problem(
                    where,
                    f"its {fields.id!r} field is {kind or 'not text'}: a record id "
                    "must be text or a number",
                )
            )
            continue
        doc_id = _scalar_text(raw_id).strip()
        if not doc_id:
            problems.append(Problem(where, f"has no {fields.id!r} field (the record id)"))
            continue
        # A record that is known but unusable keeps what the index already holds of it.
        source = f"{file}#{doc_id}"
        text = _scalar_text(record.get(fields.text)).strip()
        if not has_text(text):
            problems.append(Problem(source, f"line {n} has no text in its {fields.text!r} field"))
            continue
        if reason := too_large(len(text.encode()), max_bytes):
            problems.append(Problem(source, f"line {n}: its text {reason}"))
            continue
        if doc_id in seen:
            problems.append(Problem(where, f"id {doc_id!r} is already used on line {seen[doc_id]}"))
            continue
        seen[doc_id] = n
        title = _scalar_text(record.get(fields.title)).strip() if fields.title else ""
        used = {fields.id, fields.title, fields.text}
        meta = clean_metadata({k: v for k, v in record.items() if k not in used})
        docs.append(Document(doc_id, title, text, source, meta))
    return docs, problems
