"""The offline model: extractive, deterministic answers that quote the passages with `[n]`.

One score decides which sentences answer a question and whether any does:

    score = cosine(question, sentence) + COVERAGE_WEIGHT * coverage − FORM_PENALTY * (wrong form)

`cosine` is MiniLM's, `coverage` the share of the question's content words (rarer ones weigh
more) found in the sentence or in its document's title, authors, venue and year, and "wrong form"
marks a sentence without a figure when the question asks for one. The best sentences, within
KEEP_RATIO of the best, are quoted verbatim; below MIN_SCORE, or when the question names
something (a name, a figure) that no passage holds, the model abstains. A question word no
passage holds that is one slip of the keyboard from a passage word, and no real word itself, is
read as that word (`terms.respell`).

Text that speaks to the assistant is never quoted: a sentence carrying chat-template tokens or a
role tag (exact markers), or one that a linear probe over its MiniLM vector reads as addressed to
a model (instructions, role-play set-ups, fake system messages, requests to print or reveal text
or to call a tool). The probe is logistic regression fitted on hand-written instructions and on
sentences of papers, hard ones included (papers about instruction tuning, jailbreaks and agents,
imperative mathematics); its weights and threshold ship in `instruction_probe.json`
(benchmarks/train_instruction_probe.py, docs/benchmarks.md).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources

import numpy as np

from chatbot.answer.models.boundary import AnswerRequest, Condensed, CondenseRequest, Reply
from chatbot.answer.prompts import NO_ANSWER
from chatbot.index.embeddings.minilm import vocabulary_words
from chatbot.index.embeddings.sentence_vectors import DEFAULT, SentenceVectors
from chatbot.text.sentences import split_sentences
from chatbot.text.terms import reads_as_english, respell, terms, word_counts
from chatbot.values import Passage
from chatbot.verify.support import figures

# The parameters, chosen on the tuning question sets of both corpora (docs/benchmarks.md).
# Weight of the question's content words found in a sentence (or its document's metadata).
COVERAGE_WEIGHT = 0.5
# Below this best score, no passage answers the question.
MIN_SCORE = 0.38
# Sentences scoring at least this share of the best one join it in the answer.
KEEP_RATIO = 0.85
# Subtracted from a sentence without a figure when the question asks for one.
FORM_PENALTY = 0.1
# How much words carried over from earlier turns count beside the follow-up's own words.
TOPIC_WEIGHT = 0.5
MAX_SENTENCES = 3

READS_ENGLISH = (
    "The offline model reads English only: ask in English, or configure a model that "
    "reads your language (CHATBOT_MODEL, OPENAI_BASE_URL)."
)

_NUMBER = re.compile(r"\d")
# Questions that ask for a quantity, a date or a count.
_ASKS_FIGURE = re.compile(
    r"\b(how (many|much|long|large|big|fast|often|old)|what (percentage|fraction|proportion|"
    r"share|number|year)|in which year|when)\b",
    re.IGNORECASE,
)
# Exact markers of text written to steer a chat model: template tokens and role tags.
_CHAT_MARKUP = re.compile(
    r"<\|[a-z_]+\|>|\[/?INST\]|<</?SYS>>|^\s*(system|assistant|user)\s*:", re.IGNORECASE
)
# The probe's weights over MiniLM sentence vectors, its bias and its probability threshold.
_PROBE_FILE = "instruction_probe.json"
# A sentence opening with a pointing word needs the one before it to mean anything.
_POINTING = re.compile(r"^(?:This|These|That|Those|It|Its|They|Their|Such)\b")
_NAME = re.compile(r"[A-Z][a-z]*[A-Z0-9]\w*|[A-Z]{2,}s?")


@dataclass(frozen=True)
class Candidate:
    """A sentence of a passage, and how well it answers the question."""

    n: int  # passage number, from 1
    index: int  # position in the passage
    text: str
    score: float


def ask_figure(question: str) -> bool:
    """Whether the question asks for a quantity, a date or a count."""
    return bool(_ASKS_FIGURE.search(question))


def names(question: str) -> set[str]:
    """Names a question gives, lowercased: acronyms and mixed-case words ("GPT", "NeurIPS",
    "ZetaCoder"), each part of a hyphenated one on its own, a plural acronym as its singular."""
    parts = re.findall(r"[\w]+", question)
    found = {p[:-1] if re.fullmatch(r"[A-Z]{2,}s", p) else p for p in parts if _NAME.fullmatch(p)}
    return {n.lower() for n in found}


def missing_names(question: str, passages: Sequence[Passage]) -> set[str]:
    """The names and figures of `question` that no passage (text or metadata) holds."""
    known = " ".join(
        f"{p.title} {p.text} " + " ".join(str(v) for v in p.metadata.values()) for p in passages
    )
    lower = known.lower()
    missing = {n for n in names(question) if not re.search(rf"\b{re.escape(n)}", lower)}
    # Only figures in digits: "tens of thousands" in a question may be "thousands" in a passage.
    asked = {f.replace(",", "") for f in re.findall(r"\d+(?:[.,]\d+)*", question)}
    return missing | (asked - figures(known))


@cache
def _probe() -> tuple[np.ndarray, float, float]:
    """The instruction probe: weights, bias and the threshold as a logit (read once)."""
    data = json.loads(resources.files(__package__).joinpath(_PROBE_FILE).read_text("utf-8"))
    threshold = float(data["threshold"])
    return (
        np.asarray(data["weights"], dtype=np.float32),
        float(data["bias"]),
        math.log(threshold / (1 - threshold)),
    )


def addresses_assistant(sentences: Sequence[str], vectors: np.ndarray) -> list[bool]:
    """For each sentence and its unit MiniLM vector: whether it speaks to a chat model."""
    if not sentences:
        return []
    weights, bias, threshold = _probe()
    # Comparing logits spares the sigmoid: p >= t exactly when logit(p) >= logit(t).
    logits = vectors @ weights + bias
    return [
        bool(_CHAT_MARKUP.search(s)) or float(z) >= threshold for s, z in zip(sentences, logits)
    ]


def _meta_terms(p: Passage) -> set[str]:
    about = " ".join(str(p.metadata.get(k, "")) for k in ("authors", "venue", "year"))
    return set(terms(f"{p.title} {about}"))


def _respelled(request: AnswerRequest) -> AnswerRequest:
    """The request with each slip of the keyboard read as the passages' word it is one slip from."""
    words = word_counts(f"{p.title} {p.text}" for p in request.passages)
    real = vocabulary_words()
    question = respell(request.question, words, real)
    # A first question is its own standalone question: respelled once.
    if request.standalone == request.question:
        return replace(request, question=question, standalone=question)
    return replace(request, question=question, standalone=respell(request.standalone, words, real))


def _plain(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


class OfflineModel:
    """The default model: no network, no key; answers by quoting the passages."""

    name = "offline"

    def __init__(self, vectors: SentenceVectors = DEFAULT) -> None:
        self.vectors = vectors

    def condense(self, request: CondenseRequest) -> Condensed:
        """The follow-up with the user's two previous questions after it, as one search query."""
        earlier = [t["content"] for t in request.history if t["role"] == "user"][-2:]
        return Condensed(" ".join([request.question, *reversed(earlier)]).strip())

    def answer(self, request: AnswerRequest) -> Reply:
        """Quote the sentences that best answer the question, or abstain."""
        text, abstained = self.reply_text(request)
        # Word by word, as a real model streams, so the UI and the CLI take the same path.
        return Reply(re.findall(r"\S+\s*", text), request.passages, abstained=abstained)

    def reply_text(self, request: AnswerRequest) -> tuple[str, bool]:
        """The answer's text and whether it abstains."""
        if not reads_as_english(request.question, vocabulary_words()):
            return READS_ENGLISH, True
        passages = request.passages
        if not passages or missing_names(request.question, passages):
            return NO_ANSWER, True
        chosen = self.choose(request)
        if not chosen:
            return NO_ANSWER, True
        return " ".join(cite(c.text, c.n) for c in chosen), False

    def candidates(
        self, request: AnswerRequest, sentences: list[list[str]] | None = None
    ) -> list[Candidate]:
        """Every quotable sentence of the passages, scored against the question."""
        if sentences is None:
            sentences = [split_sentences(p.text) for p in request.passages]
        said = {_plain(t["content"]) for t in request.history if t["role"] == "assistant"}
        found = [
            (n, i, s)
            for n, texts in enumerate(sentences, 1)
            for i, s in enumerate(texts)
            if not s.rstrip("…. ").endswith("?") and not any(_plain(s) in a for a in said)
        ]
        if not found:
            return []
        texts = [s for _, _, s in found]
        request = _respelled(request)
        vectors = self.vectors(texts)
        asked = self.vectors([request.standalone], persist=False)[0]
        cosines = vectors @ asked
        steering = addresses_assistant(texts, vectors)
        sentence_terms = [set(terms(s)) for s in texts]
        weights = self._weights(request, sentence_terms)
        total = sum(weights.values()) or 1.0
        meta = [_meta_terms(p) for p in request.passages]
        figure = ask_figure(request.question)
        out = []
        for (n, i, s), cosine, steers, own in zip(found, cosines, steering, sentence_terms):
            if steers:
                continue
            have = own | meta[n - 1]
            coverage = sum(w for t, w in weights.items() if t in have) / total
            penalty = FORM_PENALTY if figure and not _NUMBER.search(s) else 0.0
            out.append(Candidate(n, i, s, float(cosine) + COVERAGE_WEIGHT * coverage - penalty))
        return out

    def _weights(self, request: AnswerRequest, sentence_terms: list[set[str]]) -> dict[str, float]:
        """Each question word's weight: rarer among the sentences weighs more; words carried
        over from earlier turns weigh TOPIC_WEIGHT as much as the question's own."""
        own = set(terms(request.question))
        wanted = own | set(terms(request.standalone))
        df = Counter(t for ts in sentence_terms for t in ts if t in wanted)
        size = len(sentence_terms)
        return {
            t: math.log(1 + size / (1 + df[t])) * (1.0 if t in own else TOPIC_WEIGHT)
            for t in wanted
        }

    def choose(self, request: AnswerRequest) -> list[Candidate]:
        """The sentences to quote, in passage order; none when the best is below MIN_SCORE.

        A sentence that opens by pointing back ("This is…", "They…") is quoted with the one
        before it, which says what it points to.
        """
        sentences = [split_sentences(p.text) for p in request.passages]
        ranked = sorted(self.candidates(request, sentences), key=lambda c: -c.score)
        if not ranked or ranked[0].score < MIN_SCORE:
            return []
        chosen: list[Candidate] = []
        for c in ranked:
            if len(chosen) == MAX_SENTENCES or c.score < KEEP_RATIO * ranked[0].score:
                break
            if any(_plain(c.text) == _plain(o.text) for o in chosen):
                continue
            chosen.append(c)
            if _POINTING.match(c.text) and c.index > 0:
                before = sentences[c.n - 1][c.index - 1]
                if all((o.n, o.index) != (c.n, c.index - 1) for o in chosen):
                    chosen.append(Candidate(c.n, c.index - 1, before, c.score))
        return sorted(chosen, key=lambda c: (c.n, c.index))


def cite(sentence: str, n: int) -> str:
    """The sentence with its `[n]` before the final full stop."""
    sentence = re.sub(r"\s*(\.\.\.|…)$", "", sentence).rstrip()
    if sentence.endswith("."):
        return f"{sentence[:-1]} [{n}]."
    return f"{sentence} [{n}]"
