"""One sentence splitter for the package: Markdown structure first, then a library for the prose.

Structure is decided before any sentence rule runs: YAML front matter, heading lines (ATX
`# …`, setext underlines, a bold line standing alone), thematic breaks, blank-line paragraph
breaks and list or quote markers. What is left are prose blocks, each handed to sentencex;
the choice and its measurements are in docs/benchmarks.md (benchmarks/bench_sentences.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import sentencex

Span = tuple[int, int]

_ATX = re.compile(r"[ ]{0,3}#{1,6}(?:[ \t]|$)")
_RULE = re.compile(r"[ ]{0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$")
_SETEXT = re.compile(r"[ ]{0,3}(?:=+|-+)[ \t]*$")
_BOLD_LINE = re.compile(r"\s*(?:\*\*|__)[^*_\n]+(?:\*\*|__)\s*:?\s*$")
_MARKER = re.compile(r"[ \t]*(?:>[ \t]?)*(?:[-*+•][ \t]+|\d{1,3}[.)][ \t]+)?")
_TABLE = re.compile(r"\s*\|")
_FENCE = re.compile(r"[ ]{0,3}(?:```|~~~)")
_TRAILING_ELLIPSIS = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"”’)]))\s+(?:\.\.\.|…)$")
_WORD = re.compile(r"\w")
_CONTINUES = re.compile(r"[\d,;:)\]}\-–—]")


def is_heading(line: str) -> bool:
    """Whether a line is Markdown structure rather than prose: a heading, a rule or a table row."""
    return bool(
        _ATX.match(line) or _RULE.match(line) or _BOLD_LINE.match(line) or _TABLE.match(line)
    )


def _lines(text: str) -> Iterator[tuple[int, str]]:
    start = 0
    for line in text.splitlines(keepends=True):
        yield start, line.rstrip("\r\n")
        start += len(line)


def _front_matter_end(text: str) -> int:
    """Where YAML front matter (`---` on the first line, closed by `---`) ends; 0 if none."""
    if not text.startswith("---"):
        return 0
    lines = list(_lines(text))
    if lines[0][1].strip() != "---":
        return 0
    for start, line in lines[1:]:
        if line.strip() in ("---", "..."):
            return start + len(line)
    return 0


def _blocks(text: str) -> list[Span]:
    """Spans of the prose blocks of `text`: paragraphs and list items, without their markers."""
    out: list[Span] = []
    current: list[int] = []  # [start, end] of the open block

    def close() -> None:
        if current:
            out.append((current[0], current[1]))
            current.clear()

    body_start = _front_matter_end(text)
    lines = [(a, ln) for a, ln in _lines(text) if a >= body_start]
    fenced, in_list = False, False
    for i, (start, line) in enumerate(lines):
        if _FENCE.match(line):
            # Code is not prose: nothing inside a fence is a sentence.
            fenced = not fenced
            close()
            continue
        underline = i + 1 < len(lines) and bool(_SETEXT.match(lines[i + 1][1]))
        if fenced or not line.strip() or is_heading(line) or _SETEXT.match(line) or underline:
            close()
            in_list = in_list and not line.strip()
            continue
        marker = _MARKER.match(line)
        body = start + (marker.end() if marker else 0)
        kind = marker.group().strip() if marker else ""
        # As in CommonMark, a number other than 1 does not start a list inside a paragraph
        # ("… rose by\n12. Then …" is one paragraph).
        if kind[:1].isdigit() and current and not in_list and kind[:-1] != "1":
            kind, body = "", start
        if kind:
            close()  # a list item or quote line starts a block of its own
            in_list = True
        elif not current:
            in_list = False
        if current:
            current[1] = start + len(line)
        else:
            current.extend([body, start + len(line)])
    close()
    return out


def _library(prose: str) -> list[Span]:
    """Sentence spans of one prose block, from sentencex (its pieces tile the input exactly)."""
    spans, at = [], 0
    for piece in sentencex.segment("en", prose):
        spans.append((at, at + len(piece)))
        at += len(piece)
    return spans


def _spans_with(split: Callable[[str], list[Span]], text: str, join: bool = True) -> list[Span]:
    """Sentence spans of `text`, using `split` for the prose inside each block."""
    spans: list[Span] = []
    for a, b in _blocks(text):
        # A line break inside a paragraph is a soft wrap: the library sees a space there.
        prose = text[a:b].replace("\r", " ").replace("\n", " ")
        block: list[Span] = []
        for s, e in split(prose):
            piece = prose[s:e]
            s += len(piece) - len(piece.lstrip())
            e -= len(piece) - len(piece.rstrip())
            # A truncation mark after a finished sentence ("… reality? ...") is not part of it,
            # and a piece without a word ("...", "}") is no sentence at all.
            cut = _TRAILING_ELLIPSIS.search(prose, s, e)
            e = cut.start() if cut else e
            if e <= s or not _WORD.search(prose, s, e):
                continue
            if join and block and _CONTINUES.match(prose, s):
                # "Eq. | 2 holds", "(Chen et al., | 2020)", "one-vs. | -rest": no sentence
                # starts with a digit or with punctuation that continues a clause.
                block[-1] = (block[-1][0], e)
            else:
                block.append((s, e))
        spans.extend((a + s, a + e) for s, e in block)
    return spans


def sentence_spans(text: str) -> list[Span]:
    """(start, end) of each sentence of `text`, in order, trimmed; structure lines excluded."""
    return _spans_with(_library, text)


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, as exact substrings; headings and list markers are not in them."""
    return [text[a:b] for a, b in sentence_spans(text)]
