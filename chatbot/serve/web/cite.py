"""How an answer's `[n]` markers and ⚠ flags are shown: each marker with its own evidence."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

_MARKER = re.compile(r"\[(\d+)\]")
# How much of a marker's quote its preview shows (characters); a sentence rarely comes close.
QUOTE_PREVIEW = 600
# Why a sentence of an answer is flagged ⚠, by `Unsupported.reason`.
UNSUPPORTED_WHY = {
    "not_found": "Not found in the cited source",
    "uncited": "Cites no source",
}
# Stands for the ⚠ flag while the text is made inert, which escapes all HTML: private-use
# characters no answer contains, around the index of the flagged sentence.
_FLAG = re.compile("\ue000(\\d+)\ue001")


@dataclass(frozen=True)
class Evidence:
    """What one `[n]` of an answer rests on: the quote and the indices of its citation's spans."""

    n: int
    quote: str = ""
    spans: tuple[int, ...] = ()


def marker_evidence(text: str, citations: list[dict[str, Any]]) -> list[Evidence]:
    """For each `[n]` in `text`, in order: the span(s) of citation n backing the claim before it.

    `Citation.quote` and `spans` hold the union over the whole answer; a marker shows the
    sentence(s) the evidence step found for its own sentence (`Citation.backing`: the entry of
    the last sentence starting before the marker), or all of them when it found none there.
    """
    by_n = {c["n"]: c for c in citations}
    evidence = []
    for m in _MARKER.finditer(text):
        n = int(m[1])
        c = by_n.get(n) or {}
        spans = [tuple(s) for s in c.get("spans") or ()]
        if not spans:
            evidence.append(Evidence(n, c.get("quote", "")))
            continue
        before = [picked for start, picked in c.get("backing") or () if start <= m.start()]
        picked = tuple(before[-1]) if before and before[-1] else tuple(range(len(spans)))
        quote = " ".join(c["text"][spans[i][0] : spans[i][1]] for i in picked)
        evidence.append(Evidence(n, quote, picked))
    return evidence


def linkify(text: str, answer: int, evidence: list[Evidence] | None = None) -> str:
    """`text` with each `[n]` a Markdown link to source n of answer `answer`.

    With its evidence, a link names the spans to highlight (`#src-1-2:0,3`) and carries the
    quote as its title, which the page shows as the marker's preview.
    """
    evidence = evidence or []
    count = 0

    def link(m: re.Match) -> str:
        nonlocal count
        n, ev = int(m[1]), evidence[count] if count < len(evidence) else None
        count += 1
        if ev is None or ev.n != n:
            return f"[[{n}]](#src-{answer}-{n})"
        quote = " ".join(ev.quote.split())
        if len(quote) > QUOTE_PREVIEW:
            quote = quote[:QUOTE_PREVIEW].rsplit(" ", 1)[0] + "…"
        title = ' "' + html.escape(quote, quote=True) + '"' if quote else ""
        picks = ":" + ",".join(map(str, ev.spans)) if ev.spans else ""
        return f"[[{n}]](#src-{answer}-{n}{picks}{title})"

    return _MARKER.sub(link, text)


def with_flags(text: str, unsupported: list[dict[str, Any]]) -> str:
    """`text` with a placeholder for the ⚠ flag after each unsupported sentence."""
    out, at = [], 0
    ends = sorted((u["end"], i) for i, u in enumerate(unsupported))
    for end, i in ends:
        end = min(max(end, at), len(text))
        out += [text[at:end], f"\ue000{i}\ue001"]
        at = end
    return "".join([*out, text[at:]])


def put_flags(text: str, unsupported: list[dict[str, Any]], render) -> str:
    """`text` with each flag placeholder replaced by `render(its Unsupported dict)`."""
    return _FLAG.sub(lambda m: render(unsupported[int(m[1])]), text)


def why(u: dict[str, Any]) -> str:
    """Why a sentence is flagged, in a reader's words."""
    return UNSUPPORTED_WHY.get(u.get("reason", ""), "Not supported by its sources")


def flag_html(u: dict[str, Any]) -> str:
    """The ⚠ after an unsupported sentence: a link, so a tap or Tab reaches it too.

    The page shows its title as a tooltip on hover, tap or focus, and makes it the flag's name.
    """
    return f" <a class='unsupported' href='#why' title='{html.escape(why(u), quote=True)}'>⚠</a>"
