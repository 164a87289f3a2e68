"""Does a passage support a sentence? One evidence step for quotes and verdicts alike.

For each answer sentence and each passage it cites, `evidence` finds the passage sentence(s) that
back it, once: a citation's `quote` and `spans` and the sentence's verdict both come from that.

The verdict is general. Hard evidence vetoes: a figure or a name the sentence gives that the
passage lacks (and halves the score). Otherwise one score decides:

    score = SIMILARITY_WEIGHT * cosine(sentence, closest passage sentence)
            + (1 - SIMILARITY_WEIGHT) * share of the sentence's content words found in the two
              closest passage sentences and the document's title and metadata

and the sentence is supported when it reaches THRESHOLD. With a real model configured and
CHATBOT_SUPPORT_CHECK=model, the model itself judges every sentence of an answer in one extra call
(`answer.models.chat_answerer.ChatModelAnswerer.judge`); this lexical check stays the fallback.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from chatbot.index.embeddings.sentence_vectors import DEFAULT, SentenceVectors
from chatbot.text.markers import answer_sentences, cited, without_markers
from chatbot.text.sentences import sentence_spans
from chatbot.text.terms import terms
from chatbot.values import Passage, Support, Unsupported

# Chosen on the tuning claim sets (docs/benchmarks.md).
SIMILARITY_WEIGHT = 0.8
THRESHOLD = 0.59
# A second passage sentence joins the quote when its cosine is this close to the best one's.
CLOSE_MATCH = 0.9

Span = tuple[int, int]
Judge = Callable[[list[tuple[str, list[Passage]]]], list[bool] | None]

_FIGURE = re.compile(r"\d+(?:[.,]\d+)*")
# Numbers written as words (a closed class of English): "ten thousand", "hundreds".
_NUMBER_WORDS = {
    **{w: i for i, w in enumerate("two three four five six seven eight nine ten".split(), 2)},
    "eleven": 11,
    "twelve": 12, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000,
    "million": 10**6, "billion": 10**9, "trillion": 10**12,
}  # fmt: skip
# "8 billion", "7B", "1.5M": a figure in digits times a scale.
_SCALES = {"K": 10**3, "k": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
_SCALED = re.compile(r"(\d+(?:[.,]\d+)*)\s*(hundred|thousand|million|billion|trillion|[KkMBT]\b)")
# Groups of three digits after a space, a no-break or a thin space: "10 000".
_GROUPED = re.compile(r"(?<![\d.,])(\d{1,3})((?:[ \u00a0\u202f\u2009]\d{3})+)(?![\d.,]?\d)")
_NAME = re.compile(
    r"(?<![.!?:]\s)\b(?:[A-Z][a-z]*[A-Z0-9][\w-]*|[A-Z]{2,}[\w-]*|[A-Z]\w*-[\w-]+|[A-Z][a-z]+)"
)


@dataclass(frozen=True)
class Backing:
    """How one passage backs one answer sentence."""

    spans: tuple[Span, ...]
    score: float
    supported: bool
    vetoed: bool = False  # a figure or a name the passage does not give


@dataclass(frozen=True)
class Evidence:
    """Per answer number, the spans quoted as its support; and the sentences nothing backs.

    `backing` says, per answer number, which of those spans back which sentence: each sentence
    citing it (by its start in the answer) with the spans found for it.
    """

    spans: dict[int, tuple[Span, ...]] = field(default_factory=dict)
    unsupported: tuple[Unsupported, ...] = ()
    backing: dict[int, tuple[tuple[int, tuple[Span, ...]], ...]] = field(default_factory=dict)


def figures(text: str, *, claim: bool = False) -> set[str]:
    """The numbers `text` gives, in digits or words, as plain numbers: "10,000", "10 000", "10k"
    and "ten thousand" are all "10000", "a hundred" is "100"; "thousands" (no count) is "1000s".

    A passage's figures are every reading of them: "12 345" is 12345, 12 and 345; "1B to 8B" is
    1000000000, 8000000000 and the 1 of "1 to 8 billion". A `claim`'s are the one it means:
    "10 000" is 10000, "10k" 10000 and no "10" a passage must give.
    """
    grouped = _GROUPED.sub(lambda m: m.group(1) + re.sub(r"\D", "", m.group(2)), text)
    found = set()
    for count, scale in _SCALED.findall(grouped):
        value = float(count.replace(",", "")) * _NUMBER_WORDS.get(
            scale.lower(), _SCALES.get(scale, 1)
        )
        found.add(str(int(value)) if value.is_integer() else str(value))
    readings = [_SCALED.sub(" ", grouped)] if claim else [text, grouped]
    found.update(m.group(0).replace(",", "") for r in readings for m in _FIGURE.finditer(r))
    text = _SCALED.sub(" ", text)  # scales read with their digits are not read again as words
    value, plural = 0, False
    for word in [*re.findall(r"[a-z]+", text.lower()), ""]:
        unit = _NUMBER_WORDS.get(word.removesuffix("s") if word.endswith("s") else word)
        if unit is None:
            if value:
                found.add(f"{value}s" if plural else str(value))
            value, plural = 0, False
            continue
        if unit >= 100:
            plural = word.endswith("s") and not value
            value = (value or 1) * unit
        else:
            value += unit
    return found


def proper_names(text: str) -> set[str]:
    """Capitalised words and acronyms that do not open a sentence, lowercased, without the
    plain words hyphenated to them ("CTF-style" is "ctf") and a plural acronym as its singular
    ("LLMs" is "llm")."""
    text = text.strip()
    found = set()
    for m in _NAME.finditer(text):
        if m.start() == 0:
            continue
        kept = [p for p in m.group(0).split("-") if not (p.isalpha() and p.islower())]
        name = "-".join(kept) or m.group(0)
        found.add(name[:-1] if re.fullmatch(r"[A-Z]{2,}s", name) else name)
    return {n.lower() for n in found}


def _bare(text: str) -> str:
    return " ".join(without_markers(text).split())


def backing(
    claim: str, passage: str, vectors: SentenceVectors = DEFAULT, *, context: str = ""
) -> Backing:
    """How well `passage` (with `context`: its title and metadata) backs `claim`."""
    claim = _bare(claim)
    spans = sentence_spans(passage)
    if not claim or not spans:
        return Backing((), 0.0, False)
    words = claim.split()
    verbatim = re.search(r"\s+".join(re.escape(w) for w in words), passage)
    if verbatim:
        return Backing(((verbatim.start(), verbatim.end()),), 1.0, True)
    cosines = vectors.cosines(claim, [passage[a:b] for a, b in spans])
    order = [int(i) for i in np.argsort(-cosines)]
    best = order[0]
    chosen = tuple(sorted(spans[i] for i in order[:2] if cosines[i] >= CLOSE_MATCH * cosines[best]))
    # Coverage is counted in the two closest sentences and the document's title and metadata.
    close = " ".join(passage[a:b] for a, b in (spans[i] for i in order[:2]))
    wanted = set(terms(claim))
    coverage = len(wanted & set(terms(f"{context} {close}"))) / len(wanted) if wanted else 1.0
    score = SIMILARITY_WEIGHT * float(cosines[best]) + (1 - SIMILARITY_WEIGHT) * coverage
    known = f"{context} {passage}"
    vetoed = bool(figures(claim, claim=True) - figures(known.replace(",", ""))) or any(
        n not in known.lower() for n in proper_names(claim)
    )
    if vetoed:
        score /= 2  # hard evidence against the sentence outweighs how close its wording is
    return Backing(chosen, round(score, 4), score >= THRESHOLD and not vetoed, vetoed)


def check_claim(claim: str, passage_text: str, vectors: SentenceVectors = DEFAULT) -> Support:
    """Whether `passage_text` supports `claim`, how well (0-1), and its best sentence(s)."""
    b = backing(claim, passage_text, vectors)
    return Support(b.supported, b.score, " ".join(passage_text[x:y] for x, y in b.spans))


def _context(p: Passage) -> str:
    return " ".join([p.title, *(str(v) for v in p.metadata.values())])


def evidence(
    text: str,
    passages: Sequence[Passage],
    numbers: dict[int, int] | None = None,
    vectors: SentenceVectors = DEFAULT,
    judge: Judge | None = None,
) -> Evidence:
    """Each citation's supporting spans, and the answer sentences their passages do not back.

    `numbers` maps prompt numbers (from 1) to the answer's numbers; `judge`, when given, decides
    every cited sentence at once, and the lexical verdict is kept where it cannot.
    """
    if numbers is None:
        numbers = {n: n for n in range(1, len(passages) + 1)}
    by_answer = {a: passages[p - 1] for p, a in numbers.items() if 1 <= p <= len(passages)}
    spans: dict[int, set[Span]] = {}
    by_sentence: dict[int, list[tuple[int, tuple[Span, ...]]]] = {}
    rows: list[tuple[str, int, list[int], list[Backing]]] = []
    pos = 0
    for sentence in answer_sentences(text):
        start = text.find(sentence, pos)
        pos = start + len(sentence)
        ns = [n for n in cited(sentence) if n in by_answer]
        backs = [
            backing(sentence, by_answer[n].text, vectors, context=_context(by_answer[n]))
            for n in ns
        ]
        for n, b in zip(ns, backs):
            spans.setdefault(n, set()).update(b.spans)
            by_sentence.setdefault(n, []).append((start, b.spans))
        rows.append((sentence, start, ns, backs))
    verdicts = _judged(judge, rows, by_answer)
    unsupported = []
    for (sentence, start, ns, backs), judged in zip(rows, verdicts):
        if not ns:
            # A short connective ("In short:") says nothing; a short one giving a figure or a
            # name ("It was 1850.") does.
            said = len(terms(sentence)) >= 2 or figures(sentence) or proper_names(sentence)
            if said or not cited(text):
                unsupported.append(
                    Unsupported(sentence, start, start + len(sentence), "uncited", (), 0.0)
                )
            continue
        ok = judged if judged is not None else any(b.supported for b in backs)
        if not ok:
            best = max(b.score for b in backs)
            unsupported.append(
                Unsupported(sentence, start, start + len(sentence), "not_found", tuple(ns), best)
            )
    return Evidence(
        {n: tuple(sorted(s)) for n, s in spans.items()},
        tuple(unsupported),
        {n: tuple(b) for n, b in by_sentence.items()},
    )


def _judged(judge: Judge | None, rows, by_answer) -> list[bool | None]:
    """The model's verdict for each cited sentence, or None where there is none."""
    cited_rows = [(s, [by_answer[n] for n in ns]) for s, _, ns, _ in rows if ns]
    verdicts = judge(cited_rows) if judge and cited_rows else None
    if not verdicts or len(verdicts) != len(cited_rows):
        return [None] * len(rows)
    it = iter(verdicts)
    return [next(it) if ns else None for _, _, ns, _ in rows]
