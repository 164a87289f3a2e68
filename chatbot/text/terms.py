"""Words of a text as retrieval and answering compare them: content words, stemmed, in American
spelling; and what a question's words say about it (English or not, asking for a list)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable
from functools import lru_cache

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*|\d+(?:\.\d+)?")
# A short English stop list plus question words, which say nothing about the topic.
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in into is
    it its itself just let me more most my myself no nor not now of off on once only or other our
    ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    s t don doesn didn isn wasn weren won tell describe explain mention mentions mentioned say says
    said give please paper papers summary summaries article authors author corpus deal deals
    involve involves discuss discusses address addresses concern concerns focus focuses talk
    talks propose proposes proposed present presents introduce introduces new novel
    colleagues coauthors co et al""".split()
)

# "Which papers…", "List the summaries that…": the question wants every relevant source.
_LISTING = re.compile(
    r"^\s*(which|what|list|name|find)\b.*\b(papers|summaries|works|studies|articles|ones)\b",
    re.IGNORECASE,
)


def reads_as_english(question: str, real: Collection[str] = ()) -> bool:
    """Whether a question reads as English.

    Not when most of its letters are outside the Latin alphabet ("多少居民", "Что такое"). A
    question of three or more words is English when it uses an English function word; without
    one, when no word has an accent and most of its words (or their stems) are words of `real`
    (an English vocabulary), as in a query of keywords ("deep ensembles versus large models").
    """
    letters = [c for c in question if c.isalpha()]
    if sum(not c.isascii() for c in letters) * 2 > len(letters):
        return False
    words = re.findall(r"[^\W\d_]+", question.lower())
    if len(words) < 3:
        return True
    # "s" and "t" are in the stop list for "don't" and "it's", and say nothing of the language.
    if any(w in STOPWORDS and len(w) > 1 for w in words):
        return True
    if not all(w.isascii() for w in words):
        return False
    known = _stems(frozenset(real))
    stems = _stemmer().stemWords(words)
    return sum(w in real or s in known for w, s in zip(words, stems, strict=True)) * 2 > len(words)


@lru_cache(maxsize=2)
def _stems(words: frozenset[str]) -> frozenset[str]:
    return frozenset(_stemmer().stemWords(list(words)))


def asks_for_list(question: str) -> bool:
    """True for questions that ask which works (plural) are about something."""
    return bool(_LISTING.search(question))


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")


# British spellings read as American ones, so "behaviours" finds "behaviors" and "optimise"
# "optimize": -our, -ise/-isation after the endings that take -ize, -yse, -tre, doubled l.
_BRITISH = re.compile(
    r"^(?:(?P<our>behavi|col|neighb|lab|hon|fav|harb|flav|rum|hum|vap|endeav|savi)our"
    r"|(?P<ise>\w{2,}(?:al|im|ogn|an|ar|or|er|it|et|en|ur))is"
    r"|(?P<yse>\w+l)ys(?=e|ed|es|ing|er|ers$)"
    r"|(?P<tre>cen|me|fib|li|thea)tre"
    r"|(?P<ll>model|label|travel|cancel|signal|tunnel|level|fuel|channel|total|funnel|dial|panel)l"
    r"(?=ed|ing|er|ers$)"
    r"|(?P<ce>defen|licen|offen)ce)",
)
_AMERICAN = {"our": "or", "ise": "iz", "yse": "yz", "tre": "ter", "ll": "", "ce": "se"}
_ISE_ENDINGS = ("e", "ed", "es", "ing", "er", "ers", "ation", "ations")


# Short forms read as the word they shorten: "math" is "mathematics".
_SHORT = {"math": "mathematics", "maths": "mathematics", "stats": "statistics"}


def american(word: str) -> str:
    """A lowercase word in American spelling ("behaviour" -> "behavior", "optimised" ->
    "optimized") and without the short forms above; other words unchanged."""
    if word in _SHORT:
        return _SHORT[word]
    match = _BRITISH.match(word)
    if not match:
        return word
    kind = match.lastgroup
    if kind == "ise" and word[match.end() :] not in _ISE_ENDINGS:
        return word
    return match.group(kind) + _AMERICAN[kind] + word[match.end() :]


def terms(text: str) -> list[str]:
    """Lowercased, stemmed content words of `text`, stop words removed, in American spelling."""
    words = [american(w.lower()) for w in _WORD.findall(text)]
    words = [w for w in words if w not in STOPWORDS]
    return _stemmer().stemWords(words) if words else []


# Words this short have too many real words one slip away to be respelled safely.
MIN_RESPELL = 5
_LETTERS = re.compile(r"[A-Za-z]+")


def one_slip(a: str, b: str) -> bool:
    """Whether `b` is `a` with one letter added, dropped, changed, or two neighbours swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        if len(diff) == 1:
            return True
        i, j = diff[0], diff[-1]
        return len(diff) == 2 and j == i + 1 and a[i] == b[j] and a[j] == b[i]
    short, long = (a, b) if len(a) < len(b) else (b, a)
    i = 0
    while i < len(short) and short[i] == long[i]:
        i += 1
    return short[i:] == long[i + 1 :]


def word_counts(texts: Iterable[str]) -> Counter[str]:
    """How often each lowercase word occurs in `texts`: the words `respell` reads slips as."""
    return Counter(w for t in texts for w in re.findall(r"[a-z]+", t.lower()))


def respell(text: str, words: dict[str, int], real: Collection[str] = ()) -> str:
    """`text` with each word that `words` lacks replaced by the commonest word of `words` one
    typing slip away ("transprt" -> "transport"), when there is one; other words unchanged.

    `words` maps lowercase words to how often they occur (the text being answered from). A word
    in `real` (a vocabulary of real words), a stop word, or a form of a word of `words` (same
    stem: "agents" beside "agent") is never respelled.
    """

    def unknown(word: str) -> bool:
        low = word.lower()
        return len(low) >= MIN_RESPELL and not (low in words or low in real or low in STOPWORDS)

    if not any(unknown(w) for w in _LETTERS.findall(text)):
        return text
    stems = set(_stemmer().stemWords([american(w) for w in words]))

    def fix(match: re.Match[str]) -> str:
        word = match.group(0)
        low = word.lower()
        if not unknown(word) or _stemmer().stemWord(american(low)) in stems:
            return word
        near = [w for w in words if one_slip(low, w)]
        return max(near, key=lambda w: (words[w], w)) if near else word

    return _LETTERS.sub(fix, text)
