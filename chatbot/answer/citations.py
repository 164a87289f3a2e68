"""`[n]` markers: those naming a shown passage are kept (also while streaming), renumbered, cited.

The model cites passages by their number in the prompt; the answer numbers them anew, 1..m in
order of first use, so `[2][5]` becomes `[1][2]`. `numbers` (prompt number → answer number) grows
as markers appear, while streaming too. Each citation carries its evidence: the passage sentence(s)
that support the answer sentences citing it, with their offsets in the passage text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from chatbot.text.markers import MARKER, cited
from chatbot.values import Citation, Passage

# The longest unfinished marker worth holding back while streaming, e.g. "[12, 13, 14".
_HOLD = 24


def clean(text: str, valid: set[int], numbers: dict[int, int] | None = None) -> str:
    """`text` with `[1, 2]` written as `[1][2]` and markers of unknown passages removed.

    With `numbers` (prompt number → answer number, updated in place) the kept markers are
    renumbered in order of first use; without it they keep the prompt's numbers.
    """

    def fix(m: re.Match[str]) -> str:
        ns = [int(x) for x in re.split(r"\s*[,;]\s*", m.group(1))]
        kept = [n for n in ns if n in valid]
        if not kept:
            return ""
        if numbers is not None:
            kept = [numbers.setdefault(n, len(numbers) + 1) for n in kept]
        lead = m.group(0)[: len(m.group(0)) - len(m.group(0).lstrip())]
        return lead + "".join(f"[{n}]" for n in kept)

    return MARKER.sub(fix, text)


def cite(
    text: str,
    passages: Sequence[Passage],
    numbers: dict[int, int] | None,
    spans: dict[int, tuple[tuple[int, int], ...]],
    backing: dict[int, tuple[tuple[int, tuple[tuple[int, int], ...]], ...]] | None = None,
) -> list[Citation]:
    """The passages `text` cites, by answer number, each with the sentence(s) supporting it.

    `numbers` maps the prompt's passage numbers (from 1) to the numbers used in `text`; without
    it `text` uses the prompt's numbers. `spans` are, per answer number, the passage spans the
    evidence step found backing the sentences that cite it, and `backing` which of them back
    which sentence (`support.Evidence`).
    """
    used = set(cited(text))
    if numbers is None:
        numbers = {n: n for n in range(1, len(passages) + 1)}
    out = []
    for prompt_n, n in numbers.items():
        if n not in used or not 1 <= prompt_n <= len(passages):
            continue
        p = passages[prompt_n - 1]
        found = spans.get(n, ())
        quote = " ".join(p.text[a:b] for a, b in found)
        picks = tuple(
            (start, tuple(found.index(s) for s in backs))
            for start, backs in (backing or {}).get(n, ())
        )
        meta = dict(p.metadata)
        out.append(Citation(n, p.doc_id, p.title, p.text, p.score, meta, quote, found, picks))
    return sorted(out, key=lambda c: c.n)


def clean_stream(
    pieces: Iterable[str], valid: set[int], numbers: dict[int, int] | None = None
) -> Iterator[str]:
    """Clean markers in streamed text; a marker split across pieces is held until complete.

    With `numbers`, markers are renumbered as in `clean` and `numbers` grows as they stream.
    """
    buf = ""
    for piece in pieces:
        buf += piece
        cut = _safe_cut(buf)
        if cut:
            out = clean(buf[:cut], valid, numbers)
            buf = buf[cut:]
            if out:
                yield out
    if buf:
        out = clean(buf, valid, numbers)
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
