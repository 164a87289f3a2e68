"""`[n]` citation markers in an answer's text: found, removed, and kept with their sentence."""

from __future__ import annotations

import re

from chatbot.text.sentences import split_sentences

MARKER = re.compile(r"\s*\[(\d+(?:\s*[,;]\s*\d+)*)\]")

# "… the passage says so [1] Another claim …": the offline model drops the full stop of a sentence
# that ended in an ellipsis, so its marker alone ends the sentence.
_AFTER_MARKER = re.compile(r"(?<=\])\s+(?=[\"“‘(A-Z])")


def without_markers(text: str) -> str:
    """`text` with its `[n]` citation markers (and the space before each) removed."""
    return MARKER.sub("", text)


def cited(text: str) -> list[int]:
    """Passage numbers cited in `text`, in order of first appearance."""
    seen: list[int] = []
    for m in MARKER.finditer(text):
        for x in re.split(r"\s*[,;]\s*", m.group(1)):
            if int(x) not in seen:
                seen.append(int(x))
    return seen


def answer_sentences(text: str) -> list[str]:
    """The answer's sentences; a marker without a full stop after it still ends its sentence."""
    return [part for s in split_sentences(text) for part in _AFTER_MARKER.split(s) if part]
