"""`[n]` markers: those naming a shown passage are kept (also while streaming), renumbered, cited.

The model cites passages by their number in the prompt; the answer numbers them anew, 1..m in
order of first use, so `[2][5]` becomes `[1][2]`. `numbers` (prompt number → answer number) grows
as markers appear, while streaming too. Each citation carries its evidence: the passage sentence(s)
that support the answer sentences citing it, with their offsets in the passage text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from .extract import split_sentences
from .keyword import terms
from .types import Citation, Passage

_MARKER = re.compile(r"\s*\[(\d+(?:\s*[,;]\s*\d+)*)\]")
# The longest unfinished marker worth holding back while streaming, e.g. "[12, 13, 14".
_HOLD = 24
# A second passage sentence joins the quote when it matches the answer sentence this well beside
# the best one: a claim drawn from two sentences is quoted with both.
CLOSE_MATCH = 0.8

# "… the passage says so [1] Another claim …": the offline model drops the full stop of a sentence
# that ended in an ellipsis, so its marker alone ends the sentence.
_AFTER_MARKER = re.compile(r"(?<=\])\s+(?=[\"“‘(A-Z])")

Span = tuple[int, int]


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

    return _MARKER.sub(fix, text)


def without_markers(text: str) -> str:
    """`text` with its `[n]` citation markers (and the space before each) removed."""
    return _MARKER.sub("", text)


def cited(text: str) -> list[int]:
    """Passage numbers cited in `text`, in order of first appearance."""
    seen: list[int] = []
    for m in _MARKER.finditer(text):
        for x in re.split(r"\s*[,;]\s*", m.group(1)):
            if int(x) not in seen:
                seen.append(int(x))
    return seen


def cite(
    text: str, passages: Sequence[Passage], numbers: dict[int, int] | None = None
) -> list[Citation]:
    """The passages `text` cites, by answer number, each with the sentence(s) supporting it.

    `numbers` maps the prompt's passage numbers (from 1) to the numbers used in `text`; without
    it `text` uses the prompt's numbers.
    """
    used = set(cited(text))
    if numbers is None:
        numbers = {n: n for n in range(1, len(passages) + 1)}
    claims = claims_by_number(text)
    out = []
    for prompt_n, n in numbers.items():
        if n not in used or not 1 <= prompt_n <= len(passages):
            continue
        p = passages[prompt_n - 1]
        quote, spans = evidence(claims.get(n, []), p.text)
        out.append(Citation(n, p.doc_id, p.title, p.text, p.score, dict(p.metadata), quote, spans))
    return sorted(out, key=lambda c: c.n)


def claims_by_number(text: str) -> dict[int, list[list[str]]]:
    """For each cited number, the answer's sentences citing it, markers removed.

    Each claim is a list of readings, longest first: sentences without a marker belong to the
    cited sentence after them ("X. This means Y [1]."), so the claim is tried with them and alone.
    """
    claims: dict[int, list[list[str]]] = {}
    pending: list[str] = []
    for sentence in answer_sentences(text):
        ns = cited(sentence)
        if not ns:
            pending.append(sentence)
            continue
        bare = [without_markers(s).strip() for s in [*pending, sentence]]
        readings = [" ".join(bare), bare[-1]] if pending else [bare[-1]]
        for n in ns:
            claims.setdefault(n, []).append(readings)
        pending = []
    return claims


def answer_sentences(text: str) -> list[str]:
    """The answer's sentences; a marker without a full stop after it still ends its sentence."""
    return [part for s in split_sentences(text) for part in _AFTER_MARKER.split(s) if part]


def evidence(claims: list[list[str]], text: str) -> tuple[str, tuple[Span, ...]]:
    """The sentence(s) of `text` supporting `claims`, and their offsets in `text`."""
    spans: set[Span] = set()
    for readings in claims:
        spans.update(_verbatim(readings, text) or _best_sentences(readings[-1], text))
    ordered = tuple(sorted(spans))
    return " ".join(text[a:b] for a, b in ordered), ordered


def _verbatim(readings: list[str], text: str) -> list[Span]:
    """Where a reading stands word for word in `text` (as the offline model quotes), if it does."""
    for reading in readings:
        words = reading.split()
        if not words:
            continue
        m = re.search(r"\s+".join(re.escape(w) for w in words), text)
        if m:
            return [(m.start(), m.end())]
    return []


def _best_sentences(claim: str, text: str) -> list[Span]:
    """The sentence of `text` sharing most stemmed terms with `claim`; two if they are close."""
    wanted = set(terms(claim))
    if not wanted:
        return []
    scored = []
    for span in sentence_spans(text):
        share = len(wanted & set(terms(text[span[0] : span[1]]))) / len(wanted)
        if share > 0:
            scored.append((share, span))
    scored.sort(key=lambda x: -x[0])
    if not scored:
        return []
    top = scored[0][0]
    return [span for share, span in scored[:2] if share >= CLOSE_MATCH * top]


def sentence_spans(text: str) -> list[Span]:
    """The `(start, end)` of each sentence of `text`, split as the offline model splits."""
    spans: list[Span] = []
    pos = 0
    for sentence in split_sentences(text):
        start = text.find(sentence, pos)
        if start == -1:
            continue
        spans.append((start, start + len(sentence)))
        pos = start + len(sentence)
    return spans


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
