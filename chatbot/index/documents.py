"""Reading documents (Markdown with front matter, plain text) and splitting them into passages."""

from __future__ import annotations

import bisect
import hashlib
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from chatbot.index.pdf import MAX_PAGES as MAX_PDF_PAGES
from chatbot.index.pdf import SUFFIXES as PDF_SUFFIXES
from chatbot.index.records import SUFFIXES as RECORD_SUFFIXES
from chatbot.index.records import clean_metadata, has_text, is_records_file, read_records, too_large
from chatbot.values import Document, Passage, Problem

SUFFIXES = (".md", ".markdown", ".txt")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
# Texts longer than this are cut into blocks at paragraph, line or sentence ends, and each block is
# split on its own: passages come out while a large file is still being split, and the tokenizer is
# never handed an unbounded piece. Shorter texts are split whole, so their passages do not depend
# on it.
BLOCK_CHARS = 100_000
# The metadata a passage has of its own: where in its document it is.
PLACE = ("page", "page_end", "page_break", "section")


def slugify(text: str) -> str:
    """A stable lowercase id made of letters, digits and dashes."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "document"


def iter_files(paths: Iterable[str | Path]) -> Iterator[Path]:
    """Every readable document under `paths` (files as given, folders searched), sorted.

    A link to a folder is searched like a folder. A link that leads back into a folder already
    searched (a loop, or a second way to the same folder) is yielded itself, so that reading it
    names it as skipped: no folder is searched twice, so the search always ends.
    """
    yield from find_files(paths)[0]


def find_files(paths: Iterable[str | Path]) -> tuple[list[Path], list[Path]]:
    """What `iter_files` yields, and the real folders links under `paths` lead to: what an
    ingest of `paths` covers besides `paths` themselves."""
    roots = [Path(p) for p in paths]
    searched: set[str] = set()  # real paths, which every way to a folder shares
    found: list[list[Path]] = []
    links: list[list[Path]] = []
    followed: list[Path] = []
    # The given folders are searched before any link is followed: a link into one of them is
    # then the second way to it, whichever name sorts first.
    for root in roots:
        files, linked = _search(root, searched) if root.is_dir() else ([root], [])
        found.append(files)
        links.append(linked)
    for files, pending in zip(found, links, strict=True):
        while pending:
            link = pending.pop(0)
            if Path(os.path.realpath(link.parent)).is_relative_to(os.path.realpath(link)):
                files.append(link)  # it holds the folder the link is in: a loop
                continue
            if os.path.realpath(link) not in searched:
                followed.append(Path(os.path.realpath(link)))
            more, further = _search(link, searched, through_link=True)
            files += more
            pending += further
    ordered = [
        f
        for root, files in zip(roots, found, strict=True)
        for f in (sorted(files) if root.is_dir() else files)
    ]
    return ordered, followed


def _search(
    folder: Path, searched: set[str], through_link: bool = False
) -> tuple[list[Path], list[Path]]:
    """The documents under `folder` (not through links), and the links to folders met there."""
    wanted = SUFFIXES + RECORD_SUFFIXES + PDF_SUFFIXES
    files: list[Path] = []
    links: list[Path] = []
    todo = [folder]
    while todo:
        current = todo.pop()
        real = os.path.realpath(current)
        if real in searched:
            # Reached through a link, it is named; a given folder inside another one given is
            # simply not searched twice.
            if through_link:
                files.append(current)
            continue
        searched.add(real)
        try:
            entries = sorted(current.iterdir())
        except OSError:
            continue  # a folder that cannot be listed holds nothing to read
        for path in entries:
            if path.is_dir():
                (links if path.is_symlink() else todo).append(path)
            # A link that leads nowhere (a loop, a missing target) is kept, so that reading it
            # names it as skipped instead of leaving it out without a word.
            elif path.suffix.lower() in wanted and (
                path.is_file() or (path.is_symlink() and not path.exists())
            ):
                files.append(path)
    return files, links


def _reached_again(folder: Path) -> str:
    """Why a folder that a link leads back into is not read again."""
    target = os.path.realpath(folder)
    if Path(os.path.realpath(folder.parent)).is_relative_to(target):
        return "is a link back into a folder that holds it (a loop); not followed"
    if folder.is_symlink():
        return f"is a link back into a folder already read ({target}); not read twice"
    return f"is, through a link, a second way into a folder already read ({target}); not read twice"


def read_document(path: Path, max_bytes: int | None = None) -> Document:
    """Parse one file; raises ValueError with a short reason when it cannot be used.

    A file larger than `max_bytes` is refused before it is read.
    """
    try:
        if reason := too_large(path.stat().st_size, max_bytes):
            raise ValueError(reason)
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
    if not has_text(text):
        raise ValueError(
            "is empty: it holds only NUL bytes, whitespace or control characters, no text to index"
        )
    doc_id = str(meta.pop("id", "") or slugify(path.stem)).strip()
    title = str(meta.pop("title", "") or _title_from(path, text)).strip()
    if "link" in meta and "url" not in meta:
        meta["url"] = meta.pop("link")
    # The absolute path: a relative one would name another file once ingest runs elsewhere.
    return Document(doc_id, title, text, str(path.resolve()), clean_metadata(meta))


def _yaml_reason(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or "syntax error"
    return f"{problem} at line {mark.line + 2}" if mark else str(problem)


def _title_from(path: Path, text: str) -> str:
    first = text.splitlines()[0].lstrip("# ").strip()
    if path.suffix.lower() != ".txt" and len(first) <= 120:
        return first
    return path.stem.replace("_", " ").replace("-", " ").strip().capitalize()


def read_pdf_document(path: Path, max_bytes: int | None, max_pages: int) -> Document:
    """A PDF as a Document with its pages and sections; ValueError with the reason otherwise."""
    from chatbot.index.pdf import read_pdf, to_document

    return to_document(path, slugify(path.stem), read_pdf(path, max_bytes, max_pages))


def load_documents(
    paths: Iterable[str | Path],
    fields: Any = None,
    max_bytes: int | None = None,
    max_pages: int = MAX_PDF_PAGES,
    *,
    files: Iterable[Path] | None = None,
) -> tuple[list[Document], list[Problem]]:
    """Read every document under `paths`; bad files become Problems, the rest are returned.

    JSON Lines files hold one document a line; `fields` (a records.Fields) names their fields.
    A file (or a record's text) larger than `max_bytes`, or a PDF of over `max_pages` pages,
    is refused. `files` is what `find_files(paths)` found, when the caller has it already.
    """
    docs: list[Document] = []
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    for path in iter_files(paths) if files is None else files:
        if not path.exists():
            missing = "does not exist"
            if path.is_symlink():
                missing = "is a symbolic link that leads nowhere (a loop, or a missing target)"
            problems.append(Problem(str(path), missing))
            continue
        if path.is_dir():  # only a folder reached again through a link is yielded
            problems.append(Problem(str(path), _reached_again(path)))
            continue
        if is_records_file(path):
            found, bad = read_records(path, fields, max_bytes)
            problems.extend(bad)
        else:
            try:
                if path.suffix.lower() in PDF_SUFFIXES:
                    found = [read_pdf_document(path, max_bytes, max_pages)]
                else:
                    found = [read_document(path, max_bytes)]
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

        from chatbot.text.tokens import ENCODING, install_offline_encoding

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
        return [p for block in self.blocks(doc) for p in block]

    def blocks(self, doc: Document) -> Iterator[list[Passage]]:
        """The passages of `doc`, a block of its text at a time (one block unless it is long)."""
        n = offset = 0
        for block in _blocks(doc.text, BLOCK_CHARS):
            chunks = [c.strip() for c in self._splitter.split_text(block) if c.strip()]
            passages = []
            cursor = 0
            for i, chunk in enumerate(chunks):
                # Chunks are pieces of the block in order: finding each after the last one's
                # start gives its place, and so its page and section.
                at = block.find(chunk, cursor)
                start = offset + (at if at >= 0 else cursor)
                cursor = at if at >= 0 else cursor
                where = _place(doc, start, start + len(chunk))
                passages.append(self._passage(doc, n + i, chunk, where))
            yield passages
            n += len(chunks)
            offset += len(block)

    @staticmethod
    def _passage(doc: Document, i: int, chunk: str, where: dict[str, Any]) -> Passage:
        key = hashlib.sha256(f"{doc.doc_id}\n{i}\n{doc.fingerprint}\n{chunk}".encode())
        return Passage(
            passage_id=key.hexdigest()[:32],
            doc_id=doc.doc_id,
            title=doc.title,
            text=chunk,
            metadata={**doc.metadata, **where},
        )


def _place(doc: Document, start: int, end: int) -> dict[str, Any]:
    """The page(s) and section of the text from `start` to `end` of `doc`, when it has them."""
    place: dict[str, Any] = {}
    if doc.pages:
        place["page"] = bisect.bisect_right(doc.pages, start)
        place["page_end"] = max(place["page"], bisect.bisect_left(doc.pages, end))
        if place["page_end"] > place["page"]:
            # Where in the passage the next page starts: a quote before it is on the first page.
            place["page_break"] = doc.pages[place["page"]] - start
    if doc.sections:
        at = bisect.bisect_right([s for s, _ in doc.sections], start) - 1
        if at >= 0:
            place["section"] = doc.sections[at][1]
    return place


def _blocks(text: str, size: int) -> Iterator[str]:
    """`text` in pieces of at most `size` characters, cut at the largest boundary available."""
    start = 0
    while len(text) - start > size:
        end = start + size
        cut = end
        for sep in ("\n\n", "\n", ". ", " "):
            # Only the second half: a boundary near the start would leave a tiny block.
            at = text.rfind(sep, start + size // 2, end)
            if at >= 0:
                cut = at + len(sep)
                break
        yield text[start:cut]
        start = cut
    yield text[start:]
