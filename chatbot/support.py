"""Whether a passage supports a claim: its figures, names, negation and wording, by sentence.

A claim is compared with the passage's best one or two adjacent sentences. Hard evidence against
it: a number (normalised: "20%", "20 percent" and "twenty" are one figure) or unit of time, or a
name (capitalised words, acronyms, system names; "AI" is also "Artificial Intelligence") that the
passage never gives; a polarity the sentence does not share (a negation on one side and none on the
other: "were rare" agrees with "weren't prevalent"); an opposite ("increase" where the sentence
says "decrease", "computationally trivial" where it says "a massive computational headache"); an
absolute qualifier ("fully", "always") the passage never uses or a restriction ("only", "already")
the sentence does not state; a summary said to settle what the passage never speaks of showing or
concluding ("The summary confirms that…"); polarity crossed around a contrast (the claim's "X
rather than Y" where the sentence says "not just X; it is Y"); the sentence's cause given as the
effect; a comparison ("outperforms", "more robust than") in a passage that compares nothing;
something stated that the passage only ever negates ("asks clarifying questions" against "It
doesn't ask for clarification"); or one or two words swapped in a sentence the claim otherwise
repeats word for word ("a specialist robot that" for "a generalist robot that", "aligning feature
embeddings" for "aligning probability distributions"). Without it, support is the share of the
claim's content words the sentences cover (a word they do not use counts in part when one of theirs
means about the same: "untidy" for "messy"), blended with the cosine of their embeddings (the
installed MiniLM model). Passages are split once and cached by their text; sentence and word
vectors are cached with the ones the offline model's answerability check uses.

Embedding is the expensive part, so it is skipped when wording alone decides: when even a perfect
cosine and a synonym for every missing word could not lift the score to the threshold (a missing
figure or name usually), or when the claim's words are covered so well that no cosine could pull
it below; near words are looked for only when they could still decide. The score is then the bound
that decided.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from .answerable import Similarity
from .answerable import similarity as shared_similarity
from .citations import answer_sentences, cited, sentence_spans
from .keyword import terms
from .prompts import NO_ANSWER
from .types import Passage, Support, Unsupported
from .wording import (
    CONTRASTS,
    Claim,
    compares,
    figures,
    has_figure,
    lacks_restriction,
    mentions,
    negated_terms,
    opposed,
    parse_claim,
    polar_words,
    prefix_negated,
    prefix_opposed,
    reverses_cause,
    strip_markers,
    units,
)

# `supported` is `score >= THRESHOLD`. Tuned on claims_dev.jsonl (80 claims, half supported), on
# 44 claims written for the purpose (benchmarks/data/claims_written.jsonl) and on twenty-two
# sets written blind from the summaries (benchmarks/data/claims_tune*.jsonl, 1,780 claims): over
# all of them, 0.62 to 0.65 is a plateau (83-85% of unsupported claims flagged, 7-8% of
# supported); a higher threshold catches a few more unsupported claims only by flagging more
# paraphrases (0.66: 85% and 9%, with eight sets above 10%; 0.7: 87% and 12%).
# `bench_support.py --sweep`.
THRESHOLD = 0.64
# Share of the score carried by content-word coverage; the rest is the embedding cosine.
COVERAGE_WEIGHT = 0.6
# A claim word the sentences do not use is partly covered by the closest word they do use, by
# the MiniLM cosine of the two words alone: nothing at NEAR_WORD_LOW or below (unrelated words
# sit around 0.2-0.3), all of it from NEAR_WORD_HIGH ("untidy" / "messy", "hunches" /
# "intuition"), linearly between. A paraphrase says most of its words in other words; a swapped
# name or finding brings in a word with nothing near it.
NEAR_WORD_LOW, NEAR_WORD_HIGH = 0.3, 0.6
# Cosines of MiniLM sentence embeddings below LOW_COSINE mean unrelated text; above HIGH_COSINE
# a restatement. Between them the similarity is scaled linearly to 0..1.
LOW_COSINE, HIGH_COSINE = 0.2, 0.8
# Each kind of contrary evidence multiplies the score by its factor.
MISSING_NUMBER = 0.3
MISSING_NAME = 0.4
NEGATION_FLIP = 0.5
OPPOSITE = 0.5
ABSOLUTE = 0.6
INVENTED_CAUSE = 0.5
INVENTED_COMPARISON = 0.5
# A claim that repeats a sentence word for word (VERBATIM_SHARE of its words or more) but for
# one or two words, standing between the same neighbours as the same number of the sentence's
# words and far from them in meaning (MiniLM cosine under NEAR_WORD_HIGH): "a specialist robot
# that" for "a generalist robot that", "its instruction-tuning data" for "its pre-training
# data". A paraphrase changes many words; a near-verbatim claim that changes one place changes
# what it names. On the 1,744 tuning claims, spans of two words, hyphenated words and a claim
# ending where the sentence goes on catch 7 more unsupported claims and flag no more supported
# ones; spans of unequal length ("gives" for "spit outs", "seen as" for "considered") flag 3
# supported claims, so they are not swaps.
SWAPPED_WORD = 0.6
# Two words swapped for two name a thing, and related things sit closer in MiniLM than related
# words do ("random forests" / "decision trees"): such a swap counts unless the two are this
# close. On the tuning claims anything from 0.7 to 0.9 flags the same claims (2 more
# unsupported than NEAR_WORD_HIGH, no supported).
NEAR_PHRASE = 0.75
VERBATIM_SHARE = 0.75
CACHED_PASSAGES = 512
# An answer sentence with fewer content words than this ("In short:", "Here is what they say.")
# states nothing to check.
MIN_STATEMENT_TERMS = 3

Span = tuple[int, int]
_PARAGRAPH = re.compile(r"\S(?:.|\n(?!\s*\n))*")


@dataclass(frozen=True)
class _Passage:
    """A passage split into sentences, with each sentence's terms and (once asked) embeddings."""

    text: str
    spans: tuple[Span, ...]
    terms: tuple[frozenset[str], ...]
    lowered: str
    numbers: frozenset[float]
    negated: tuple[frozenset[str], ...]  # per sentence: the terms its negations bear on
    polar: tuple[frozenset[str], ...]  # per sentence: its words of the opposite pairs
    words: tuple[tuple[str, ...], ...]  # per sentence: its content words as written, lowercased

    def sentence(self, i: int) -> str:
        return self.text[self.spans[i][0] : self.spans[i][1]]


@dataclass(frozen=True)
class _Candidate:
    """One or two adjacent passage sentences that may support a claim."""

    group: tuple[int, ...]  # sentence indexes
    coverage: float  # share of the claim's terms they hold
    penalty: float  # factors for the evidence against the claim in these sentences
    missing: tuple[str, ...] = ()  # the claim's words they do not use, as written
    share: float = 0.0  # what one of those words adds to `coverage` if a synonym stands in
    swap: tuple[str, str] | None = None  # (claim word, sentence word) for one swapped word


@dataclass(frozen=True)
class _Lexical:
    """The claim against one passage: candidate sentences and the passage-wide evidence."""

    passage: _Passage
    candidates: tuple[_Candidate, ...]
    penalty: float  # factors for figures, names and qualifiers the passage never gives


class SupportChecker:
    """Checks claims against passages; thread-safe, caching passages' sentences."""

    def __init__(self, similarity: Similarity | None = None, *, exact: bool = False) -> None:
        """`similarity` embeds sentences and caches their vectors (default: the process's one,
        shared with the offline model's answerability, on the installed MiniLM model).

        With `exact`, every score compares embeddings, even when wording alone decides (to
        study thresholds); otherwise such a score is the bound that decided it.
        """
        self._similarity = similarity or shared_similarity
        self._exact = exact
        self.checked = 0  # claims judged, and how many of them needed their embeddings
        self.embedded = 0
        self._lock = threading.Lock()
        self._passages: OrderedDict[str, _Passage] = OrderedDict()
        self._word_vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    def check(self, claim: str, passage_text: str) -> Support:
        """Whether `passage_text` supports `claim`."""
        return self.check_many([(claim, [passage_text])])[0]

    def check_many(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[Support]:
        """Each `(claim, passage texts)` judged against the best sentences of those passages.

        Everything still to embed (claims and uncached passages) goes in one batch.
        """
        results: list[Support | None] = []
        pending: list[tuple[int, Claim, list[_Lexical]]] = []
        for i, (claim, texts) in enumerate(items):
            quote = verbatim(claim, texts)
            if quote is not None:
                results.append(Support(True, 1.0, quote))
                continue
            parsed = parse_claim(claim)
            found = [self._swapped(lexical(parsed, self._passage(t))) for t in texts if t.strip()]
            if not found or not parsed.terms:
                results.append(Support(False, 0.0, ""))
                continue
            results.append(None)
            pending.append((i, parsed, found))
        if pending:
            self._score(pending, results)
        return [r if r is not None else Support(False, 0.0, "") for r in results]

    def _score(
        self, pending: list[tuple[int, Claim, list[_Lexical]]], results: list[Support | None]
    ) -> None:
        """Fill `results`: by wording alone when it decides, else with the embeddings compared."""
        undecided = []
        for i, claim, found in pending:
            # The score with the embeddings as close (cosine 1) and as far (0) as they can be.
            high = _best(found, lambda lx, c: combine(_room(c), 1.0))
            low = _best(found, lambda lx, c: combine(c.coverage, 0.0))
            if self._exact:
                undecided.append((i, claim, found))
            elif high[0] < THRESHOLD:
                results[i] = _support(*high)
            elif low[0] >= THRESHOLD:
                results[i] = _support(*low)
            else:
                undecided.append((i, claim, found))
        self.checked += len(pending)
        self.embedded += len(undecided)
        if not undecided:
            return
        passages = {lx.passage.text: lx.passage for _, _, found in undecided for lx in found}
        vectors = self._embed([c.text for _, c, _ in undecided], list(passages.values()))
        for row, (i, _claim, found) in enumerate(undecided):
            v = vectors[None][row]

            def cosine(lx: _Lexical, c: _Candidate, v: np.ndarray = v) -> float:
                return float(np.max(vectors[lx.passage.text][list(c.group)] @ v))

            plain = _best(found, lambda lx, c: combine(c.coverage, cosine(lx, c)))
            room = _best(found, lambda lx, c: combine(_room(c), cosine(lx, c)))
            if self._exact or plain[0] < THRESHOLD <= room[0]:
                # Only words near the claim's missing ones can still decide: look for them.
                near = {lx.passage.text: self._near_words(lx) for lx in found}

                def similar(lx: _Lexical, c: _Candidate, near=near) -> float:
                    held = near[lx.passage.text]
                    stand_in = sum(float(held[w][list(c.group)].max()) for w in c.missing)
                    return combine(min(1.0, c.coverage + c.share * stand_in), cosine(lx, c))

                plain = _best(found, similar)
            results[i] = _support(*plain)

    def _swapped(self, lx: _Lexical) -> _Lexical:
        """`lx` with SWAPPED_WORD against each candidate whose one swapped word means
        something else than the word it stands for."""
        swaps = sorted({w for c in lx.candidates if c.swap for w in c.swap})
        if not swaps:
            return lx
        vectors = dict(zip(swaps, self._similarity.vectors(swaps), strict=True))

        def far(swap: tuple[str, str]) -> bool:
            near = NEAR_PHRASE if " " in swap[0] else NEAR_WORD_HIGH
            return float(vectors[swap[0]] @ vectors[swap[1]]) < near

        candidates = tuple(
            replace(c, penalty=c.penalty * SWAPPED_WORD) if c.swap and far(c.swap) else c
            for c in lx.candidates
        )
        return replace(lx, candidates=candidates)

    def _near_words(self, lx: _Lexical) -> dict[str, np.ndarray]:
        """For each claim word some candidate lacks, per passage sentence, how far its closest
        word there stands in for it (0-1, from the MiniLM cosine of the two words)."""
        missing = sorted({w for c in lx.candidates for w in c.missing})
        sentences = len(lx.passage.spans)
        owners = np.array([j for j, words in enumerate(lx.passage.words) for _ in words], int)
        if not missing or not len(owners):
            return {w: np.zeros(sentences) for w in missing}
        cosine = self._similarity.vectors(missing) @ self._words(lx.passage).T
        credit = np.clip((cosine - NEAR_WORD_LOW) / (NEAR_WORD_HIGH - NEAR_WORD_LOW), 0.0, 1.0)
        # A passage's words come sentence by sentence: each sentence's best is one reduction.
        held, starts = np.unique(owners, return_index=True)
        best = np.zeros((len(missing), sentences))
        best[:, held] = np.maximum.reduceat(credit, starts, axis=1)
        return {w: best[i] for i, w in enumerate(missing)}

    def _words(self, passage: _Passage) -> np.ndarray:
        """The unit vectors of the passage's words, in order (computed once per passage)."""
        with self._lock:
            cached = self._word_vectors.get(passage.text)
            if cached is not None:
                self._word_vectors.move_to_end(passage.text)
                return cached
        words = [w for ws in passage.words for w in ws]
        matrix = self._similarity.vectors(words)
        with self._lock:
            self._word_vectors[passage.text] = matrix
            while len(self._word_vectors) > CACHED_PASSAGES:
                self._word_vectors.popitem(last=False)
        return matrix

    def _passage(self, text: str) -> _Passage:
        with self._lock:
            cached = self._passages.get(text)
            if cached is not None:
                self._passages.move_to_end(text)
                return cached
        passage = split_passage(text)
        with self._lock:
            self._passages[text] = passage
            while len(self._passages) > CACHED_PASSAGES:
                self._passages.popitem(last=False)
        return passage

    def _embed(self, claims: list[str], passages: list[_Passage]) -> dict:
        """Unit vectors: `None` → the claims' rows; each passage's text → its sentences' rows."""
        texts = claims + [p.sentence(i) for p in passages for i in range(len(p.spans))]
        matrix = self._similarity.vectors(texts)
        out: dict = {None: matrix[: len(claims)]}
        at = len(claims)
        for p in passages:
            out[p.text] = matrix[at : at + len(p.spans)]
            at += len(p.spans)
        return out


_DEFAULT: SupportChecker | None = None
_DEFAULT_LOCK = threading.Lock()


def default_checker() -> SupportChecker:
    """The process's shared checker (one passage cache, the installed MiniLM model)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = SupportChecker()
        return _DEFAULT


def check_claim(claim: str, passage_text: str) -> Support:
    """Whether `passage_text` supports `claim`, with the shared checker."""
    return default_checker().check(claim, passage_text)


@dataclass(frozen=True)
class _Piece:
    """One sentence of an answer, where it stands, and the answer numbers it cites."""

    text: str
    start: int
    end: int
    numbers: tuple[int, ...]


def check_answer(
    text: str,
    passages: Sequence[Passage],
    numbers: dict[int, int] | None = None,
    checker: SupportChecker | None = None,
) -> tuple[Unsupported, ...]:
    """The sentences of `text` its cited passages do not support, and those stating uncited things.

    `passages` are the ones the model was shown (prompt `[n]` is `passages[n - 1]`); `numbers`
    maps prompt numbers to the answer's (the identity without it). A sentence without `[n]` is
    judged against the passages of the nearest citing sentence after it (else before it), as in
    "X. So Y [1]."; an answer that cites nothing is one uncited entry.
    """
    if numbers is None:
        numbers = {n: n for n in range(1, len(passages) + 1)}
    by_answer = {a: passages[p - 1].text for p, a in numbers.items() if 1 <= p <= len(passages)}
    pieces = [p for p in answer_pieces(text) if _states_something(p.text)]
    if not pieces:
        return ()
    if not cited(text):
        return (Unsupported(text, 0, len(text), "uncited", (), 0.0),)
    items, owners = [], []
    for i, piece in enumerate(pieces):
        ns = piece.numbers or _nearest_numbers(pieces, i)
        items.append((piece.text, [by_answer[n] for n in ns if n in by_answer]))
        owners.append(piece)
    checked = (checker or default_checker()).check_many(items)
    out = []
    for piece, result in zip(owners, checked, strict=True):
        if not result.supported:
            reason = "not_found" if piece.numbers else "uncited"
            out.append(
                Unsupported(piece.text, piece.start, piece.end, reason, piece.numbers, result.score)
            )
    return tuple(out)


def answer_pieces(text: str) -> list[_Piece]:
    """The answer's sentences (a list item or line is at least one), with offsets and numbers."""
    pieces = []
    pos = 0
    for line in text.splitlines():
        for sentence in answer_sentences(line):
            start = text.find(sentence, pos)
            if start == -1:
                continue
            pos = start + len(sentence)
            pieces.append(_Piece(sentence, start, pos, tuple(cited(sentence))))
    return pieces


def _nearest_numbers(pieces: list[_Piece], i: int) -> tuple[int, ...]:
    """The numbers cited by the nearest sentence after `pieces[i]` that cites, else before it."""
    for piece in [*pieces[i + 1 :], *reversed(pieces[:i])]:
        if piece.numbers:
            return piece.numbers
    return ()


def _states_something(sentence: str) -> bool:
    """False for connectives, headings and the abstention sentence: nothing there to check."""
    bare = strip_markers(sentence)
    if NO_ANSWER.rstrip(".").lower() in bare.lower():
        return False
    return len(terms(bare)) >= MIN_STATEMENT_TERMS


def verbatim(claim: str, texts: Sequence[str]) -> str | None:
    """The claim itself when it stands word for word in one of `texts` (as offline quotes do)."""
    # Markdown emphasis stays: the quote is matched as written.
    words = strip_markers(claim, emphasis=False).rstrip(".…").removesuffix("...").split()
    if len(words) < 3:
        return None
    pattern = re.compile(r"\s+".join(re.escape(w) for w in words))
    for text in texts:
        m = pattern.search(text)
        if m:
            return m.group(0)
    return None


def split_passage(text: str) -> _Passage:
    """A passage's sentences (offsets, terms) and figures, ready for checking claims."""
    spans: list[Span] = []
    # Paragraphs first: a heading or a title line without a full stop is a sentence of its own.
    for para in _PARAGRAPH.finditer(text):
        at = para.start()
        spans += [(at + a, at + b) for a, b in sentence_spans(para.group(0))]
    sentences = [text[a:b] for a, b in spans]
    return _Passage(
        text,
        tuple(spans),
        tuple(frozenset(terms(x)) for x in sentences),
        text.lower(),
        figures(text),
        tuple(negated_terms(x) for x in sentences),
        tuple(polar_words(x) for x in sentences),
        tuple(tuple(content_words(x).values()) for x in sentences),
    )


def _best(found: list[_Lexical], base) -> tuple[float, str]:
    """The best candidate's score (`base(lexical, candidate)` times its penalties), and quote."""
    best_score, best_quote = -1.0, ""
    for lx in found:
        for c in lx.candidates:
            score = base(lx, c) * c.penalty * lx.penalty
            if score > best_score:
                best_score = score
                best_quote = _quote(lx.passage, c.group)
    return best_score, best_quote


def _support(score: float, quote: str) -> Support:
    score = round(max(0.0, min(1.0, score)), 4)
    return Support(score >= THRESHOLD, score, quote)


def _room(c: _Candidate) -> float:
    """The candidate's coverage if every claim word it lacks had a synonym in it."""
    return min(1.0, c.coverage + c.share * len(c.missing))


def combine(coverage: float, cosine: float) -> float:
    """Support before penalties: the claim's terms covered, and the embeddings' similarity."""
    similar = min(1.0, max(0.0, (cosine - LOW_COSINE) / (HIGH_COSINE - LOW_COSINE)))
    return COVERAGE_WEIGHT * coverage + (1 - COVERAGE_WEIGHT) * similar


def content_words(text: str) -> dict[str, str]:
    """Each content term of `text` with a word that gives it, as written (lowercased)."""
    out: dict[str, str] = {}
    for word in re.findall(r"[A-Za-z][A-Za-z-]{2,}", text):
        found = terms(word)
        if len(found) == 1:
            out.setdefault(found[0], word.lower())
    return out


def lexical(claim: Claim, passage: _Passage) -> _Lexical:
    """The passage's candidate sentences (each alone, each with the next) for `claim`."""
    wanted = claim.terms
    written = content_words(claim.text)
    n = len(passage.spans)
    known = frozenset().union(*passage.terms)
    swaps: dict[str, tuple[str, str] | None] = {}  # by closest sentence: groups share them
    candidates = []
    for group in [(i,) for i in range(n)] + [(i, i + 1) for i in range(n - 1)]:
        have = frozenset().union(*(passage.terms[j] for j in group))
        coverage = len(wanted & have) / len(wanted) if wanted else 0.0
        if len(group) == 2:
            # A pair is worth more than its sentences only for a claim that draws on both.
            if coverage <= max(len(wanted & passage.terms[j]) for j in group) / len(wanted):
                continue
        missing = tuple(sorted(written[t] for t in wanted - have if t in written))
        share = 1 / len(wanted) if wanted else 0.0
        closest = _closest(claim, passage, group)
        if closest not in swaps:
            swaps[closest] = _swap(claim, known, closest)
        swap = swaps[closest]
        candidates.append(
            _Candidate(group, coverage, _quote_penalty(claim, passage, group), missing, share, swap)
        )
    if candidates:
        # The sentences closest to the claim in wording are where the passage speaks to it: a
        # negation or opposite there holds against every candidate, so a claim cannot escape
        # "It doesn't ask for clarification" through a sentence that does not mention it.
        top = max(c.coverage for c in candidates)
        against = min(c.penalty for c in candidates if c.coverage == top)
        candidates = [replace(c, penalty=min(c.penalty, against)) for c in candidates]
        # A restriction ("only", "already"), unlike a negation, holds for its own sentence only:
        # the one of the candidate closest to the claim ("Polis has already been used …" does
        # not make the next sentence's rigorous selection something Polis already provides).
        candidates = [
            replace(c, penalty=c.penalty * ABSOLUTE)
            if lacks_restriction(claim.restrictions, _closest(claim, passage, c.group))
            else c
            for c in candidates
        ]
    return _Lexical(passage, tuple(candidates), _passage_penalty(claim, passage))


_TOKEN = re.compile(r"[A-Za-z0-9][\w'’-]*")
# "Random forests are described as the poster child…": how the summary puts it is not what the
# sentence says, so it is left out of the claim's words.
_FRAMING = re.compile(
    r"\b(is|are|was|were)\s+(?:described|presented|characteri[sz]ed|framed|portrayed|depicted|"
    r"referred\s+to|held\s+up|singled\s+out|said\s+to\s+be)\s+as\b",
    re.IGNORECASE,
)


def _swap(claim: Claim, known: frozenset[str], sentence: str) -> tuple[str, str] | None:
    """The claim words standing where `sentence`, which the claim otherwise repeats word for
    word, has others: one or two claim words, some of whose terms are not in `known` (the
    passage's terms), between the same neighbours as as many words of the sentence ("its
    instruction-tuning data" for "its pre-training data", "a search engine from" for "a
    recommendation system from"); the claim's end stands before any word of the sentence ("the
    lens of memorization." for "the lens of interpolation: if…"). None when the claim changes
    more, or less, than that one place."""
    # Words only, between markers of the start and the end: "underlying symmetry" at the end.
    said = ["", *(t.lower() for t in _TOKEN.findall(_FRAMING.sub(r"\1", claim.text))), ""]
    quoted = ["", *(t.lower() for t in _TOKEN.findall(sentence)), ""]
    words = said[1:-1]
    if not words or sum(t in set(quoted) for t in words) < VERBATIM_SHARE * len(words):
        return None
    content = {t: terms(t) for t in {*said, *quoted}}
    found = set()
    for i in range(1, len(said) - 1):
        for size in (1, 2):
            span = said[i : i + size]
            if i + size >= len(said) or any(w in quoted for w in span):
                continue
            spanned = [t for w in span for t in content[w]]
            if not spanned or all(t in known for t in spanned):
                continue
            left, right = said[i - 1], said[i + size]
            for k in range(1, len(quoted) - 1):
                if quoted[k - 1] != left:
                    continue
                other = quoted[k : k + size]
                if k + size >= len(quoted) or any(w in said for w in other):
                    continue
                # The claim's end is the end of what it quotes: any word may come next.
                if right and right != quoted[k + size]:
                    continue
                if any(content[w] for w in other):
                    # "the lens of memorization": the word before "of" holds it in place.
                    same_before = i >= 2 and k >= 2 and said[i - 2] == quoted[k - 2]
                    before = said[i - 2] if same_before else ""
                    # Both opening their sentence, the subject is held in place by the start.
                    held = any(content[w] for w in (left, right, before) if w) or not left
                    found.add((" ".join(span), " ".join(other), held))
    if len(found) != 1:
        return None
    word, other, held = found.pop()
    # Between two function words ("is ubiquitous" ending a sentence for "is everywhere") a word
    # is said another way as often as swapped: one neighbour must be a content word.
    return (word, other) if held else None


def _passage_penalty(claim: Claim, passage: _Passage) -> float:
    """Factors for the claim's figures, names and absolute qualifiers the passage never gives."""
    factor = 1.0
    if any(not has_figure(v, passage.numbers) for v in claim.numbers) or not claim.units <= units(
        passage.lowered
    ):
        factor *= MISSING_NUMBER
    if any(not mentions(passage.lowered, name) for name in claim.names):
        factor *= MISSING_NAME
    if lacks_restriction(claim.absolutes, passage.lowered):
        factor *= ABSOLUTE
    # "Small models outperform GPT-4", "a single tree is more robust than a forest": a
    # comparison in a passage that compares nothing.
    if not compares(claim.comparisons, passage.lowered):
        factor *= INVENTED_COMPARISON
    # A word the passage only ever negates ("They begin to ramble incoherently" against "stay
    # coherent"), wherever the sentence saying it stands.
    if prefix_opposed(claim.polar, frozenset().union(*passage.polar)):
        factor *= OPPOSITE
    if _only_negated(claim, passage):
        factor *= NEGATION_FLIP
    return factor


def _only_negated(claim: Claim, passage: _Passage) -> bool:
    """Whether the claim, negating nothing, states something every passage sentence saying it
    negates ("LLMs routinely ask clarifying questions" against "It doesn't ask for
    clarification."). Terms match by their first five letters: "clarifying" is "clarification".
    A claim with a negation of its own is left to the polarity check: where its scope ends is
    uncertain on both sides."""
    if claim.negated:
        return False
    for term in claim.terms:
        root = term[:5]
        if len(root) < 5:
            continue
        holders = [j for j, ts in enumerate(passage.terms) if any(t[:5] == root for t in ts)]
        if holders and all(any(t[:5] == root for t in passage.negated[j]) for j in holders):
            return True
    return False


def _quote_penalty(claim: Claim, passage: _Passage, group: tuple[int, ...]) -> float:
    """Factors for a negation or an opposite that these sentences do not share with the claim."""
    negated = frozenset().union(*(passage.negated[j] for j in group))
    polar = frozenset().union(*(passage.polar[j] for j in group))
    factor = 1.0
    # Polarity of the matched clause: a negation on either side that bears on shared words is
    # contradicted only when the other side holds no negation at all ("were rare" and "weren't
    # prevalent" agree). A claim's negation is looked for in the sentences holding the words it
    # bears on: another sentence's negation ("… hasn't just fitted a curve") is about other things.
    # A passage that negates one of the same words elsewhere backs the claim's negation ("It
    # doesn't ask for clarification" for "replies at once rather than asking what you mean").
    speaking = [j for j in group if claim.negated & passage.terms[j]]
    unnegated = (
        speaking
        and not any(
            passage.negated[j] or prefix_negated(claim.negated, passage.terms[j]) for j in speaking
        )
        and not claim.negated & frozenset().union(*passage.negated)
    )
    # Crossed polarity: the claim negates what the sentence affirms and affirms what it negates,
    # sharing no negated word ("simply attends to a sequence rather than retrieving memories"
    # against "isn't just attending to a sequence; it is … to retrieve memories"). Negations
    # sharing a word agree on it, whatever else their scopes take in ("good at seeing but does
    # not always know what it looks at" for "great at looking, but doesn't know … seeing").
    # Only a contrast ("rather than", "no longer just", "isn't just … ; it is") puts two things
    # on either side of one negation: elsewhere the scopes differ too often ("its data lacked
    # the details" says what "the details weren't prevalent in its data" says).
    contrasting = bool(CONTRASTS.search(claim.text))
    crossed = any(
        claim.negated & (passage.terms[j] - passage.negated[j])
        and passage.negated[j] & (claim.terms - claim.negated)
        and not claim.negated & passage.negated[j]
        and (contrasting or CONTRASTS.search(passage.sentence(j)))
        for j in group
    )
    if unnegated or crossed or (negated & claim.terms and not claim.negated):
        factor *= NEGATION_FLIP
    # An opposite counts where the sentence holding it speaks to the claim, not in a title
    # ("Small language models …") run in with the sentence that does ("bigger is better").
    if opposed(claim.polar, polar) and any(
        opposed(claim.polar, passage.polar[j]) and len(claim.terms & passage.terms[j]) >= 2
        for j in group
    ):
        factor *= OPPOSITE
    if claim.cause is not None and reverses_cause(claim.cause, _quote(passage, group)):
        factor *= INVENTED_CAUSE
    return factor


def _quote(passage: _Passage, group: tuple[int, ...]) -> str:
    return " ".join(passage.sentence(j) for j in group)


def _closest(claim: Claim, passage: _Passage, group: tuple[int, ...]) -> str:
    """The sentence of `group` sharing the most terms with the claim (the first on a tie)."""
    return passage.sentence(max(group, key=lambda j: (len(claim.terms & passage.terms[j]), -j)))
