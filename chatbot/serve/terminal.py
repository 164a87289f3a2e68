"""Text from documents and models made safe to print on a terminal.

A document (or a model quoting one) may hold escape sequences: printed as they are, they clear
the screen, retitle the window, hide text or plant OSC 8 hyperlinks. `clean` removes every
control and escape sequence and keeps the text, with its line breaks and tabs.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, TextIO

# Whole sequences first, so their parameters go with them: OSC, DCS, SOS, PM and APC strings end
# at BEL or ST (ESC \) or run to the end of the text; CSI ends at its final byte; any other ESC
# takes the one character after it. The 8-bit forms (U+009B CSI, U+009D OSC…) are covered too.
_SEQUENCE = re.compile(
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c|$)"
    r"|(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"
)
# What is left: C0 controls but tab and line feed, DEL, C1 controls, and the bidirectional
# overrides and isolates that make a terminal show text in another order than it is stored.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# A sequence the text ends in the middle of, which more text may finish: a string not yet ended
# (an ESC last may begin its ST), a CSI before its final byte, an ESC before the character after it;
# and a CR last, which may be the first half of a CRLF.
_UNFINISHED = re.compile(
    r"(?:(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*\x1b?"
    r"|(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*"
    r"|\x1b[\x20-\x2f]*"
    r"|\r)\Z"
)


def clean(text: object) -> str:
    """`text` as a string without control characters or terminal escape sequences."""
    shown = text if isinstance(text, str) else str(text)
    # A carriage return alone would let a line overwrite itself: it becomes a line break.
    shown = shown.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", _SEQUENCE.sub("", shown))


class StreamCleaner:
    """`clean` for text that arrives in pieces: a sequence split between pieces goes whole.

    Cleaning each piece alone would drop the ESC of "\\x1b" + "[0m" and print "[0m".
    """

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: object) -> str:
        """The cleaned text of `piece`; a sequence it ends in the middle of waits for the next."""
        text = self._held + (piece if isinstance(piece, str) else str(piece))
        match = _UNFINISHED.search(text)
        cut = match.start() if match else len(text)
        self._held = text[cut:]
        return clean(text[:cut])

    def close(self) -> str:
        """What is still held when the stream ends, cleaned: an unfinished sequence is dropped."""
        held, self._held = self._held, ""
        return clean(held)


# The supporting quote under each source is cut to this length: a reminder, not the passage.
QUOTE_CHARS = 160
# Printed after the text of an answer the model broke off, on the same stream as the text.
CUT_OFF = "[cut off: the answer above is incomplete]"
# Characters json.dumps(ensure_ascii=False) leaves raw that a terminal may still act on.
_RAW_IN_JSON = re.compile(r"[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def say(*parts: object, file: TextIO | None = None, end: str = "\n", flush: bool = False) -> None:
    """`print` for text that came from a document or a model: cleaned first."""
    print(" ".join(clean(p) for p in parts), file=file or sys.stdout, end=end, flush=flush)


def safe_json(value: Any, **kwargs: Any) -> str:
    """`json.dumps` whose output holds no character a terminal acts on (all data is kept)."""
    text = json.dumps(value, ensure_ascii=False, **kwargs)
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def short(text: str, limit: int = QUOTE_CHARS) -> str:
    """`text` on one line, cut at a word to at most `limit` characters."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"


def byline(meta: dict) -> str:
    """ "Ines Duarte, Priya Raman · ICML 2023" from a record's authors, venue and year."""
    when = " ".join(str(meta[k]) for k in ("venue", "year") if meta.get(k) not in (None, ""))
    return " · ".join(part for part in (str(meta.get("authors") or ""), when) if part)


def print_sources(answer: Any, out: TextIO | None = None) -> None:
    """The answer's sources, one numbered line each with its link and supporting quote."""
    if not answer.citations:
        return
    say("\nSources:", file=out)
    for c in answer.citations:
        head = " — ".join(part for part in (c.title, c.paper, byline(c.metadata)) if part)
        page = f", p. {c.page}" if c.page else ""
        say(f"  [{c.n}] {head} ({c.doc_id}{page}, score {c.score:.2f})", file=out)
        if c.url:
            say(f"      {c.url}", file=out)
        if c.quote:
            say(f"      “{short(c.quote)}”", file=out)


def print_stream(stream: Any, error: type[BaseException]) -> None:
    """Print the answer as it arrives, then its sources.

    When `error` (or Ctrl-C) breaks the stream off, the text printed so far is marked as cut
    off where it was printed (stdout): a reader of stdout alone never takes it for a whole answer.
    """
    printed = False
    shown = StreamCleaner()
    try:
        for piece in stream:
            print(shown.feed(piece), end="", flush=True)
            printed = True
    except (error, KeyboardInterrupt):
        if printed:
            print(shown.close(), end="")
            say(f"\n{CUT_OFF}", flush=True)
        raise
    print(shown.close())
    print_unsupported(stream.answer)
    print_narrowed(stream.answer)
    print_sources(stream.answer)


def print_narrowed(answer: Any, out: TextIO | None = None) -> None:
    """Which papers the question itself limited the search to ("papers by Ding", "in 2021")."""
    if answer and answer.narrowed:
        say(f"Searched only: {'; '.join(answer.narrowed)}", file=out)


def print_unsupported(answer: Any, out: TextIO | None = None) -> None:
    """A ⚠ line per answer sentence that its cited passages do not support, or that cites none."""
    for u in answer.unsupported if answer else ():
        if u.reason == "not_found":
            where = "not found in the cited source " + "".join(f"[{n}]" for n in u.numbers)
        else:
            where = "cites no source"
        say(f"⚠ {where}: “{short(u.sentence)}”", file=out)
