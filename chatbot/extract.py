"""Sentences of a passage as the offline model quotes them: split, read whole, not repeated.

A passage is split into sentences without its headline or a heading run into its first words; a
rhetorical question is read with the sentence that answers it, a sentence opening with "This…"
with the one before it; two sentences saying nearly the same thing count as one, and a sentence an
earlier answer quoted is recognised in a follow-up.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from .keyword import terms

# A sentence ends at . ! ? or … (a closing quote or bracket stays with it) before a capital.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?…])|(?<=[.!?…][\"”’)]))\s+(?=[\"“‘(A-Z0-9])")
# A summary cut short ends its last sentence with "...": the sentence is what came before.
_CUT = re.compile(r"\s*(?:\.\.\.|…)$")
# "This is the challenge of X." or "For years, this has been the final boss…" needs the sentence
# before it to mean anything: a pointing word opens it, perhaps after a short lead-in phrase.
_ANAPHORIC = re.compile(
    r"^(?:[A-Z][^,.;:]{0,30},\s+)?(?:[Tt]his|[Tt]hese|[Tt]hat|[Tt]hose|[Ii]t|[Tt]hey|[Ss]uch)\b"
)
# A bare section heading run into the sentence after it ("Introduction We are…").
_LEAD = re.compile(
    r"^(?:Introduction|Background|Motivation|Overview|Abstract|Conclusions?|Discussion|"
    r"Related Work|Key Findings|Takeaways)\s+(?=[A-Z\"“])"
)
# Two sentences sharing this share of the shorter one's terms say the same thing: only one is
# quoted ("Sparse attention keeps memory linear in the context length" after "The memory of
# sparse attention then stays linear in the context length"). Not tuned: on the dev, held-out
# and dev_extra questions no answer changes from 0.7 to 0.9.
NEAR_DUPLICATE = 0.8


@dataclass(frozen=True)
class Sentence:
    """A sentence of a passage, with where it sits and its content terms."""

    n: int  # passage number
    rank: int  # position of the passage in the prompt (0 = best retrieved)
    index: int  # position of the sentence in its passage
    text: str
    terms: frozenset[str]


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`, without a trailing ellipsis fragment."""
    parts = [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]
    return [p for p in parts if p not in ("...", "…")]


def passage_sentences(rank: int, n: int, title: str, body: str) -> list[Sentence]:
    """The sentences of passage `n` (retrieved at `rank`) that are worth quoting."""
    parts = split_sentences(body)
    if parts and title and parts[0].startswith(title) and len(parts[0]) > len(title):
        # A summary that opens with its headline: the headline (shown with the sources anyway)
        # is not part of the first sentence.
        parts[0] = parts[0][len(title) :].strip()
    parts = [_LEAD.sub("", p) for p in parts]
    return [Sentence(n, rank, i, p, frozenset(terms(p))) for i, p in enumerate(parts) if p]


def next_sentence(s: Sentence, sentences: list[Sentence]) -> list[Sentence]:
    """The sentence after `s` in its passage, which often gives the reason or detail `s` sets up
    ("ensembling was the closest thing to a free lunch" is followed by why); none if it asks."""
    after = [p for p in sentences if p.n == s.n and p.index == s.index + 1 and not asks(p)]
    return after[:1]


def _plain(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def already_said(s: Sentence, said: Sequence[str]) -> bool:
    """Whether an earlier answer of the conversation quoted this sentence."""
    words = _plain(s.text)
    return bool(words) and any(words in _plain(answer) for answer in said)


def restates(s: Sentence, question: str) -> bool:
    """A question in the passage that is the user's own question again answers nothing."""
    mine, asked = s.terms, frozenset(terms(question))
    return asks(s) and bool(mine) and len(mine & asked) >= NEAR_DUPLICATE * len(mine)


def distinct(candidates: list[Sentence], chosen: list[Sentence]) -> list[Sentence]:
    """The candidates that do not repeat (nearly word for word) a chosen sentence."""

    def repeats(a: Sentence, b: Sentence) -> bool:
        # Measured against the shorter sentence: one that the other all but contains adds nothing.
        shorter = min(len(a.terms), len(b.terms))
        return _plain(a.text) == _plain(b.text) or (
            shorter > 0 and len(a.terms & b.terms) >= NEAR_DUPLICATE * shorter
        )

    return [c for c in candidates if not any(repeats(c, s) for s in chosen)]


def asks(s: Sentence) -> bool:
    """Whether the sentence is a question (also one that a summary's cut ends with "...")."""
    return _CUT.sub("", s.text).endswith("?")


def continues(s: Sentence) -> bool:
    """Whether the sentence opens by pointing back to the one before it ("They begin to…")."""
    return bool(_ANAPHORIC.match(s.text))


def with_answer(s: Sentence, sentences: list[Sentence]) -> Sentence | None:
    """A rhetorical question ("But what happens when…?") with the sentence that answers it.

    A question with no answer after it in its passage says nothing: None.
    """
    if not asks(s):
        return s
    after = next((p for p in sentences if p.n == s.n and p.index == s.index + 1), None)
    if after is None or asks(after):
        return None
    return replace(s, text=f"{s.text} {after.text}", terms=s.terms | after.terms)


def with_antecedent(s: Sentence, sentences: list[Sentence]) -> Sentence:
    """A sentence opening with "This is…" read alone says nothing: prepend the one before it."""
    if s.index == 0 or not _ANAPHORIC.match(s.text):
        return s
    prev = next((p for p in sentences if p.n == s.n and p.index == s.index - 1), None)
    if prev is None or prev.text.endswith(":"):
        return s
    return replace(s, index=prev.index, text=f"{prev.text} {s.text}")
