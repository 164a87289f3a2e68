"""`[n]` markers: those naming a shown passage are kept (also while streaming) and cited."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from .types import Citation, Passage

_MARKER = re.compile(r"\s*\[(\d+(?:\s*[,;]\s*\d+)*)\]")
# The longest unfinished marker worth holding back while streaming, e.g. "[12, 13, 14".
_HOLD = 24


def clean(text: str, valid: set[int]) -> str:
    """`text` with `[1, 2]` written as `[1][2]` and markers of unknown passages removed."""

    def fix(m: re.Match[str]) -> str:
        ns = [int(x) for x in re.split(r"\s*[,;]\s*", m.group(1))]
        kept = "".join(f"[{n}]" for n in ns if n in valid)
        if not kept:
            return ""
        lead = m.group(0)[: len(m.group(0)) - len(m.group(0).lstrip())]
        return lead + kept

    return _MARKER.sub(fix, text)


def cited(text: str) -> list[int]:
    """Passage numbers cited in `text`, in order of first appearance."""
    seen: list[int] = []
    for m in _MARKER.finditer(text):
        for x in re.split(r"\s*[,;]\s*", m.group(1)):
            if int(x) not in seen:
                seen.append(int(x))
    return seen


def cite(text: str, passages: Sequence[Passage]) -> list[Citation]:
    """The passages `text` cites, numbered as in the prompt (from 1), in the prompt's order."""
    named = set(cited(text))
    return [
        Citation(n, p.doc_id, p.title, p.text, p.score, dict(p.metadata))
        for n, p in enumerate(passages, 1)
        if n in named
    ]


def clean_stream(pieces: Iterable[str], valid: set[int]) -> Iterator[str]:
    """Clean markers in streamed text; a marker split across pieces is held until complete."""
    buf = ""
    for piece in pieces:
        buf += piece
        cut = _safe_cut(buf)
        if cut:
            out = clean(buf[:cut], valid)
            buf = buf[cut:]
            if out:
                yield out
    if buf:
        out = clean(buf, valid)
        if out:
            yield out


def _safe_cut(buf: str) -> int:
    """How much of `buf` can be emitted: all but a possibly unfinished `[...` and its space."""
    start = buf.rfind("[")
    if start == -1 or "]" in buf[start:] or len(buf) - start > _HOLD:
        # Trailing whitespace may belong to a marker that starts in the next piece.
        return len(buf.rstrip())
    while start > 0 and buf[start - 1].isspace():
        start -= 1
    return start
