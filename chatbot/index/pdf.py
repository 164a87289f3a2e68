"""Reading PDFs: each page's text in reading order, cleaned, with where pages and sections start.

PDFium (pypdfium2, Apache-2.0/BSD) gives the text and the box of each line; the layout is read
from the boxes, not from the order a typesetter happened to draw them in: full-width lines
(title, abstract, wide figures) split a page into bands, and each band is read left column,
then right column. Running headers, footers and page numbers are lines near the top or bottom
edge that repeat across pages (digits aside) or are a bare number.
"""

from __future__ import annotations

import re
import threading
import unicodedata
import zlib
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from statistics import median

from chatbot.values import Document

SUFFIXES = (".pdf",)
MAX_PAGES = 500
# Streams may inflate to this much in all before a file is taken for a decompression bomb: a
# 20 MB paper with images inflates to a few hundred MB at most.
MAX_INFLATED = 512 * 1024 * 1024
_PIECE = 16 * 1024 * 1024  # inflated a piece at a time, each thrown away
NO_TEXT = "has no text layer (a scanned image?): OCR is not supported"
REFERENCES = "References"
# PDFium is not thread-safe: one document is read at a time in the process.
_LOCK = threading.Lock()
# Headers and footers live in the top and bottom 9% of a page.
_EDGE = 0.09
_HEADING = re.compile(
    r"^(?:(?:\d{1,2}(?:\.\d{1,2}){0,3}\.?|[A-H](?:\.\d{1,2}){0,2}\.?|[IVX]{1,5}\.)\s+"
    r"[A-Z][^.!?]{1,80}|(?:Abstract|References|Bibliography|Acknowledge?ments?|Appendix"
    r"|Conclusions?|Introduction|Related Work)\s*)$"
)
_REFERENCES = re.compile(r"^(?:\d+\.?\s+)?(?:References|Bibliography)\s*$", re.IGNORECASE)
_PAGE_NUMBER = re.compile(r"^(?:page\s+)?(?:\d{1,4}|[ivxlc]{1,6})(?:\s*(?:of|/)\s*\d{1,4})?$", re.I)
_SPACES = re.compile(r"[ \t\u00a0\u2000-\u200a\u202f\u205f\u3000]+")
# Characters PDF text layers carry that are not text: soft hyphens, zero-width marks, controls.
_INVISIBLE = re.compile(r"[\u00ad\u200b-\u200d\u2060\ufeff\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
# A footnote opens with its mark: a number or a symbol, alone (a superscript of its own) or not.
_FOOTNOTE_MARK = re.compile(r"^(?:\d{1,2}|[*\u2020\u2021\u00a7])(?:\s*\S|$)")


@dataclass(frozen=True)
class Line:
    """One line of text on a page and its box (PDF units, origin at the bottom left)."""

    text: str
    left: float
    bottom: float
    right: float
    top: float
    size: float = 0.0  # font size of its first character, 0 when unknown


@dataclass(frozen=True)
class PdfText:
    """A PDF's text: pages in reading order, with its title and authors where found."""

    pages: list[list[str]]  # each page as paragraphs; a heading is a paragraph of its own
    headings: list[list[str]]  # the headings among each page's paragraphs
    title: str
    authors: str


def check_bytes(raw: bytes) -> str:
    """Why these bytes cannot be read as a PDF, or "" when they may be."""
    head = raw[:1024]
    if b"%PDF-" not in head:
        what = "an HTML page" if b"<html" in head.lower() or b"<!doctype" in head.lower() else ""
        return f"is not a PDF{f' (it is {what})' if what else ''}: its first bytes lack '%PDF-'"
    if b"%%EOF" not in raw[-2048:]:
        return "is truncated (its end-of-file marker is missing): download or save it again"
    if inflated_over(raw, MAX_INFLATED):
        return (
            f"its compressed streams inflate to over {MAX_INFLATED // 2**20} MB "
            "(a decompression bomb?): it is not read"
        )
    return ""


def inflated_over(raw: bytes, limit: int) -> bool:
    """True when the Flate streams of `raw` inflate to more than `limit` bytes in all."""
    total = 0
    for match in re.finditer(rb"stream\r?\n", raw):
        start = match.end()
        end = raw.find(b"endstream", start)
        if end < 0:
            end = len(raw)
        inflater = zlib.decompressobj()
        data = raw[start:end]
        try:
            # Inflated 16 MB at a time and thrown away: a bomb is stopped at the limit, and
            # never held in memory.
            out = inflater.decompress(data, _PIECE)
            total += len(out)
            while inflater.unconsumed_tail and total <= limit and out:
                out = inflater.decompress(inflater.unconsumed_tail, _PIECE)
                total += len(out)
        except zlib.error:
            continue  # not a Flate stream (an image, or plain content)
        if total > limit:
            return True
    return False


def read_pdf(path: Path, max_bytes: int | None = None, max_pages: int = MAX_PAGES) -> PdfText:
    """The text of the PDF at `path`; raises ValueError with a short reason when it is unusable."""
    import pypdfium2 as pdfium

    try:
        size = path.stat().st_size
        if max_bytes and size > max_bytes:
            raise ValueError(
                f"is {size / 2**20:.1f} MB, over the {max_bytes / 2**20:g} MB limit: "
                "raise CHATBOT_MAX_FILE_MB to read it"
            )
        raw = path.read_bytes()
    except OSError as e:
        raise ValueError(f"cannot be read ({e.strerror or e})") from e
    if reason := check_bytes(raw):
        raise ValueError(reason)
    with _LOCK:
        try:
            pdf = pdfium.PdfDocument(raw)
        except pdfium.PdfiumError as e:
            if "password" in str(e).lower():
                raise ValueError("is encrypted: save a copy without a password and add that") from e
            raise ValueError(f"is damaged and cannot be read ({e}): save or export it again") from e
        try:
            if len(pdf) > max_pages:
                raise ValueError(
                    f"has {len(pdf)} pages, over the {max_pages}-page limit: split it, or raise "
                    "CHATBOT_MAX_PDF_PAGES"
                )
            meta = pdf.get_metadata_dict()
            pages = [_page_lines(pdf[i]) for i in range(len(pdf))]
            title_guess = _largest_text(pdf[0]) if len(pdf) else ""
        finally:
            pdf.close()
    if not any(line.text.strip() for page in pages for line in page):
        raise ValueError(NO_TEXT)
    pages = _without_running_lines(pages)
    paragraphs = [_paragraphs(_reading_order(page)) for page in pages]
    text_pages = _dehyphenate(paragraphs)
    headings = [[p for p in page if _is_heading(p)] for page in text_pages]
    title = clean(meta.get("Title", "")) or title_guess
    return PdfText(text_pages, headings, title, clean(meta.get("Author", "")))


def clean(text: str) -> str:
    """Ligatures and presentation forms as plain letters, odd spaces as one space."""
    text = unicodedata.normalize("NFKC", text)
    text = _INVISIBLE.sub("", text.replace("\u2010", "-").replace("\u2011", "-"))
    return _SPACES.sub(" ", text).strip()


def _page_lines(page) -> list[Line]:
    """The page's lines with their boxes, from PDFium's text rectangles."""
    import pypdfium2.raw as pdfium_c

    textpage = page.get_textpage()
    try:
        lines = []
        for i in range(textpage.count_rects()):
            left, bottom, right, top = textpage.get_rect(i)
            text = textpage.get_text_bounded(left, bottom, right, top)
            # PDFium marks a hyphen the typesetter added at a line end as \x02 (\ufffe in
            # running text): a hyphen, joined or kept by _dehyphenate.
            text = text.replace("\x02", "-").replace("\ufffe", "-")
            text = clean(text.replace("\r", " ").replace("\n", " "))
            if text:
                at = textpage.get_index(left + 0.5, (bottom + top) / 2, 2, 2)
                size = pdfium_c.FPDFText_GetFontSize(textpage, at) if at is not None else 0.0
                lines.append(Line(text, left, bottom, right, top, size))
        width, height = page.get_size()
    finally:
        textpage.close()
    return [_scaled(line, width, height) for line in lines]


def _scaled(line: Line, width: float, height: float) -> Line:
    """The line with its box as fractions of the page: pages of any size compare."""
    return Line(
        line.text,
        line.left / width,
        line.bottom / height,
        line.right / width,
        line.top / height,
        line.size,
    )


def _largest_text(page) -> str:
    """The first-page text set in the largest font near the top: a paper's title."""
    import pypdfium2.raw as raw

    textpage = page.get_textpage()
    try:
        n = min(textpage.count_chars(), 2000)
        sizes = [raw.FPDFText_GetFontSize(textpage, i) for i in range(n)]
        if not sizes:
            return ""
        big = max(sizes)
        if big <= median(sizes) * 1.15:
            return ""  # no larger font: no title to find
        first = sizes.index(big)
        last = first
        while last + 1 < n and (
            sizes[last + 1] >= big * 0.95 or textpage.get_text_range(last + 1, 1) in " \r\n"
        ):
            last += 1
        text = textpage.get_text_range(first, last - first + 1)
    finally:
        textpage.close()
    return clean(text.replace("\r", " ").replace("\n", " "))[:300]


def _key(text: str) -> str:
    return re.sub(r"\d+", "#", text.lower())


def _without_running_lines(pages: list[list[Line]]) -> list[list[Line]]:
    """The pages without running headers, footers and page numbers."""
    counts: Counter[str] = Counter()
    for page in pages:
        counts.update({_key(line.text) for line in page if _near_edge(line)})
    repeat = max(2, len(pages) // 3)
    return [
        [
            line
            for line in page
            if not (
                _near_edge(line)
                and (counts[_key(line.text)] >= repeat or _PAGE_NUMBER.match(line.text))
            )
        ]
        for page in pages
    ]


def _near_edge(line: Line) -> bool:
    return line.bottom >= 1 - _EDGE or line.top <= _EDGE


def _reading_order(lines: list[Line]) -> list[list[Line]]:
    """Columns of lines in the order they are read: bands top to bottom, columns left to right."""
    lines = sorted(lines, key=lambda line: (-line.top, line.left))
    if not lines:
        return []
    mid = 0.5
    left = [line for line in lines if line.right <= mid + 0.02]
    right = [line for line in lines if line.left >= mid - 0.02]
    if len(left) < 3 or len(right) < 3:
        return [lines]  # one column
    columns: list[list[Line]] = []
    band_left: list[Line] = []
    band_right: list[Line] = []
    for line in lines:
        if line.right <= mid + 0.02:
            band_left.append(line)
        elif line.left >= mid - 0.02:
            band_right.append(line)
        else:
            # A full-width line closes the band above it.
            columns += [c for c in (band_left, band_right) if c]
            band_left, band_right = [], []
            columns.append([line])
    columns += [c for c in (band_left, band_right) if c]
    return _footnotes_last(columns)


def _footnotes_last(columns: list[list[Line]]) -> list[list[Line]]:
    """Footnotes (small lines ending a column, the first opening with a mark) moved to the end
    of the page: in place they would cut a sentence that runs on into the next column."""
    sizes = [line.size for column in columns for line in column if line.size]
    if not sizes:
        return columns
    body = median(sizes)
    kept, notes = [], []
    for column in columns:
        n = len(column)
        while n > 1 and 0 < column[n - 1].size < 0.9 * body:
            n -= 1
        if n < len(column) and _FOOTNOTE_MARK.match(column[n].text):
            kept.append(column[:n])
            notes.append(column[n:])
        else:
            kept.append(column)
    return kept + notes


def _paragraphs(columns: list[list[Line]]) -> list[str]:
    """The lines as paragraphs: a wide gap, or a heading, starts a new one."""
    paragraphs: list[list[str]] = []
    for column in columns:
        # Same-line pieces (a word set in another font) arrive as separate boxes: merge them.
        rows = _rows(column)
        gaps = [a.bottom - b.top for a, b in pairwise(rows) if a.bottom > b.top]
        usual = median(gaps) if gaps else 0.0
        previous: Line | None = None
        for row in rows:
            heading = _is_heading(row.text)
            gap = previous.bottom - row.top if previous else 1.0
            if previous is None or heading or _is_heading(previous.text) or gap > usual * 2 + 0.004:
                paragraphs.append([])
            paragraphs[-1].append(row.text)
            previous = row
    return [" ".join(p) for p in paragraphs if p]


def _rows(column: list[Line]) -> list[Line]:
    """Boxes that share a line (a superscript, a word in another font) merged, left to right."""
    rows: list[list[Line]] = []
    for line in column:
        row = rows[-1] if rows else None
        if row and _overlap(row[0], line) > 0.4 * min(_height(row[0]), _height(line)):
            row.append(line)
        else:
            rows.append([line])
    merged = []
    for row in rows:
        row.sort(key=lambda line: line.left)
        merged.append(
            Line(
                " ".join(line.text for line in row),
                row[0].left,
                min(line.bottom for line in row),
                max(line.right for line in row),
                max(line.top for line in row),
            )
        )
    return merged


def _height(line: Line) -> float:
    return line.bottom - line.top if line.bottom > line.top else line.top - line.bottom


def _overlap(a: Line, b: Line) -> float:
    low_a, high_a = sorted((a.bottom, a.top))
    low_b, high_b = sorted((b.bottom, b.top))
    return min(high_a, high_b) - max(low_a, low_b)


def _is_heading(text: str) -> bool:
    # A numbered line of many words is a footnote or a list item, not a heading.
    return len(text) <= 90 and len(text.split()) <= 9 and bool(_HEADING.match(text))


def _dehyphenate(pages: list[list[str]]) -> list[list[str]]:
    """Words broken at line ends joined: "com- puting" → "computing", "two- column" kept as
    "two-column" when the document writes it so elsewhere."""
    text = "\n".join("\n".join(p) for p in pages)
    words = Counter(re.findall(r"[A-Za-z]+(?:-[A-Za-z]+)*", text))

    def join(m: re.Match) -> str:
        first, second = m.group(1), m.group(2)
        hyphenated = f"{first}-{second}"
        if words[hyphenated] > 0 and words[first + second] == 0:
            return hyphenated
        return first + second

    pattern = re.compile(r"([A-Za-z]+)- ([a-z]+)")
    return [[pattern.sub(join, p) for p in page] for page in pages]


def to_document(path: Path, doc_id: str, text: PdfText) -> Document:
    """The PDF as a Document: pages joined, with where each page and section starts."""
    parts: list[str] = []
    page_starts: list[int] = []
    sections: list[tuple[int, str]] = []
    offset = 0
    in_references = False
    for paragraphs, heads in zip(text.pages, text.headings, strict=True):
        page_starts.append(offset)
        for para in paragraphs:
            if para in heads:
                in_references = bool(_REFERENCES.match(para))
                sections.append((offset, REFERENCES if in_references else para))
            parts.append(para)
            offset += len(para) + 2
    body = "\n\n".join(parts)
    title = text.title or path.stem.replace("_", " ").replace("-", " ").strip()
    # `file`: the PDF the web UI serves for a source's page link.
    meta: dict[str, object] = {"pages": len(text.pages), "file": str(path.resolve())}
    if text.authors:
        meta["authors"] = text.authors
    return Document(
        doc_id,
        title,
        body,
        str(path.resolve()),
        meta,
        pages=tuple(page_starts),
        sections=tuple(sections),
    )
