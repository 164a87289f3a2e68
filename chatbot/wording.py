"""What a claim or a sentence states, read from its words: figures and units of time, names,
negations and words of negative polarity, opposites, absolute qualifiers and restrictions, and
causes, normalised so that two wordings of the same fact compare equal.

The support check (support.py) compares these between a claim (`parse_claim` reads them all
from it) and the passage it cites.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .citations import without_markers
from .extract import split_sentences
from .keyword import terms

# A negation bears on the next this many content words (or, ending its sentence, the ones before).
NEGATION_SCOPE = 4

_SMALL = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
    "hundred": 100, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12,
    "dozen": 12, "twice": 2, "double": 2, "triple": 3, "half": 0.5,
}  # fmt: skip
_SCALE = {"hundred": 100, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
# A figure: digits ("10,000", "3.5", "20%", "7B"; not the 4 of "GPT-4") or a number word, with an
# optional scale word after it ("2 trillion", "ten thousand"). "one" is left out: "one of the…".
_FIGURE = re.compile(
    r"(?<![\w.-])(\d[\d,]*(?:\.\d+)?)(?:%|x\b|([KMBT])\b)?(?!\w|[.,]\d)|\b("
    + "|".join(_SMALL)
    + r")s?\b",
    re.IGNORECASE,
)
# "7B parameters", "2T tokens": a letter after the digits scales them.
_LETTER_SCALE = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}
_SCALE_AFTER = re.compile(r"\s*(?:-\s*)?(" + "|".join(_SCALE) + r")s?\b", re.IGNORECASE)
# "between 1 and 8 billion", "1-8 billion": the scale word after a range scales both ends.
_RANGE_SCALE = re.compile(
    r"\s*(?:and|to|or|-|–)\s*\d[\d,.]*\s*(" + "|".join(_SCALE) + r")s?\b", re.IGNORECASE
)
# A name: a word with a capital after its first letter (GPT, GitLab), a digit among letters
# (GPT-4o), or a capitalised word that does not open a sentence.
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-.][A-Za-z0-9]+)*")
_OPENS = re.compile(r"(?:^|[.!?:;]\s+|[\"“‘'(]\s*)$")
# Negations, and words of negative polarity that say the same in other words ("rare" for "not
# prevalent", "lacks" for "has no", "ignores" for "without considering", "a long way from" for
# "not", "gained little traction" for "gained no traction"): a claim and a sentence that each
# hold one agree in polarity, whichever words they use.
# "Knowingly or not" and "nothing more than" deny nothing.
_NEGATION = re.compile(
    r"\b(?:(?<!\bor\s)not|no|never|cannot|neither|nor|none|unable|incapable|impossible|rarely|"
    r"nothing(?!\s+(?:more|less|other)\s+than)|seldom|hardly|barely|fail(?:s|ed|ing)?|"
    r"ignor(?:e|es|ed|ing)|disregard(?:s|ed|ing)?|rather\s+than|instead\s+of|without|"
    r"lack(?:s|ed|ing)?|"
    r"(?:is|are|was|were|be|been|remains?|remained)\s+(?:rare|scarce)|absent|absence|(?:too|very|so)\s+(?:few|little)|(?<!\ba\s)little(?!\s+(?:by|more|less|bit)\b)|far\s+from|a\s+long\s+way\s+from|"
    r"mov(?:e|es|ed|ing)\s+(?:past|beyond)|do(?:es|ing)?\s+more\s+than|beyond\s+(?:mere|simple|just))\b|n['’]t\b",
    re.IGNORECASE,
)
# A negation's clause ends at a stop, a turn or a new clause: "not one graph but a family"
# negates the graph, "rather than one, and enumerating every valid one is hard" only the one.
_CLAUSE_END = re.compile(
    r"[;:—–]|\s-\s|\b(?:but|yet|although|though|whereas)\b|,\s*(?:and|so|while|which)\b"
)
CONTRAST = re.compile(r"\b(?:rather than|instead of)\b")
# A contrast in any form, "no longer just" and "isn't just … ; it is" besides: two things on either
# side of one negation.
CONTRASTS = re.compile(
    r"\b(?:rather\s+than|instead\s+of|no\s+longer|not\s+(?:just|merely|simply|only)|"
    r"(?:is|are|was|were)n['’]t\s+(?:just|merely|simply|only))\b",
    re.IGNORECASE,
)
_OPPOSITES = [
    ("increase", "decrease"), ("improve", "worsen"), ("improve", "degrade"), ("improve", "hurt"),
    ("more", "less"), ("more", "fewer"), ("higher", "lower"), ("better", "worse"),
    ("easy", "hard"), ("easy", "difficult"), ("easy", "complicated"), ("easily", "difficult"),
    ("easily", "hard"), ("faster", "slower"), ("larger", "smaller"),
    ("amplify", "cancel"), ("amplify", "reduce"), ("consistent", "inconsistent"),
    ("simple", "complex"), ("clean", "messy"), ("success", "failure"), ("strong", "weak"),
    ("outperform", "underperform"), ("rise", "fall"), ("gain", "loss"), ("respect", "ignore"),
    ("include", "exclude"), ("accept", "reject"), ("robust", "fragile"), ("succeed", "fail"),
    ("often", "rarely"), ("flexible", "rigid"), ("local", "global"),
    ("big", "small"), ("large", "small"), ("active", "passive"),
    ("straightforward", "difficult"), ("straightforward", "hard"), ("trivial", "difficult"),
    ("trivial", "hard"), ("simple", "difficult"), ("cheap", "expensive"), ("cheap", "costly"),
    ("smarter", "worse"),
    ("genuine", "illusion"), ("same", "different"),
    ("similar", "different"), ("short", "long"), ("shallow", "deep"), ("narrow", "broad"),
    ("early", "late"), ("help", "hurt"), ("benefit", "harm"), ("add", "remove"),
    ("proactive", "passive"), ("proactive", "reactive"), ("stable", "unstable"),
    ("finite", "infinite"), ("explicit", "implicit"), ("fast", "slow"), ("quick", "slow"),
    ("efficient", "slow"), ("minimize", "maximize"), ("minimum", "maximum"), ("low", "high"),
    ("respect", "disregard"), ("fixed", "open"), ("tractable", "intractable"),
    ("solvable", "intractable"), ("efficient", "intractable"), ("solvable", "unsolvable"),
]  # fmt: skip
# How hard something is to do comes in two poles, each said many ways: any word of one opposes
# any word of the other ("computationally cheap" for "a massive computational headache",
# "learned efficiently" under the title "Statistical query hardness").
_EASE = (
    "easy",
    "easily",
    "straightforward",
    "trivial",
    "cheap",
    "efficient",
    "effortless",
    "painless",
    "tractable",
    "solvable",
)
_DIFFICULTY = (
    "hard",
    "hardness",
    "difficult",
    "headache",
    "nightmare",
    "intractable",
    "costly",
    "expensive",
    "challenging",
    "struggle",
    "burdensome",
    "prohibitive",
)
_OPPOSITES += [(a, b) for a in _EASE for b in _DIFFICULTY if (a, b) not in _OPPOSITES]
# So does how much something costs or grows ("stays modest" for "becomes astronomically high").
_MODEST = ("modest", "negligible", "constant", "minimal", "manageable")
_STEEP = ("astronomical", "enormous", "skyrocket", "explode", "exorbitant", "soar")
_OPPOSITES += [(a, b) for a in _MODEST for b in _STEEP if (a, b) not in _OPPOSITES]
# Each word of a pair (by its first five letters) with the words opposed to it.
_OPPOSED: dict[str, set[str]] = {}
for _a, _b in _OPPOSITES:
    _OPPOSED.setdefault(_a[:5], set()).add(_b[:5])
    _OPPOSED.setdefault(_b[:5], set()).add(_a[:5])
_POLAR = frozenset(_OPPOSED)
_ABSOLUTE = re.compile(
    r"\b(?:fully|completely|entirely|always|easily|merely|purely|perfectly|faithfully|"
    r"guarantee[sd]?|proves?|proven|definitely|certainly|necessarily|every|all)\b",
    re.IGNORECASE,
)
# Absolute qualifiers that say the same: any of the group in the passage backs the claim's.
_SAME = [
    "full|complete|entire|total",
    "always|invariabl",
    "mere|just|simpl|only",
    "prove|proof",
    "necessar|inevitabl|invariabl",
]
_SYNONYMS = {
    word: group
    for group in _SAME
    for word in ("fully completely entirely always merely proves proven necessarily").split()
    if re.match(rf"(?:{group})", word)
}
_NEGATED_BEFORE = re.compile(
    r"(?:\bnot|n['’]t|\bnever|\binstead\s+of|\brather\s+than)\s+(?:\w+\s+)?$", re.IGNORECASE
)


def figures(text: str) -> frozenset[float]:
    """The numbers `text` states, normalised: "20%", "20 percent" and "twenty" are all 20."""
    out: set[float] = set()
    used = 0  # the end of the last scale word read with its number ("2 trillion")
    for m in _FIGURE.finditer(text):
        if m.start() < used:
            continue
        if m.group(1):
            value = float(m.group(1).replace(",", ""))
            value *= _LETTER_SCALE.get((m.group(2) or "").lower(), 1)
        else:
            word = m.group(3).lower()
            value = float(_SMALL[word])
            if m.group(0).lower() != word:
                # "hundreds", "thousands": a magnitude, not the exact figure "1,000".
                value += 0.5
        scale = _SCALE_AFTER.match(text, m.end()) or _RANGE_SCALE.match(text, m.end())
        if scale and (m.group(1) or m.group(3).lower() not in _SCALE):
            value *= _SCALE[scale.group(1).lower()]
            used = scale.end() if scale.re is _SCALE_AFTER else used
        out.add(value)
    return frozenset(out)


def names(text: str) -> tuple[str, ...]:
    """Named things in `text`: acronyms, system names, capitalised words inside a sentence."""
    found = []
    for m in _WORD.finditer(text):
        word = m.group(0)
        inner = any(c.isupper() for c in word[1:]) or (
            any(c.isdigit() for c in word) and any(c.isalpha() for c in word)
        )
        opening = bool(_OPENS.search(text[: m.start()]))
        if inner or (word[0].isupper() and not opening and word != "I"):
            found.append(word)
    return tuple(found)


def negated_terms(text: str) -> frozenset[str]:
    """The terms a negation in `text` bears on: the next few content words after each one
    ("It doesn't ask for clarification", "incapable of deep…"). A question asserts nothing, so
    its negations do not count ("What if the next token isn't the easiest one?")."""
    out: set[str] = set()
    for sentence in split_sentences(text):
        if sentence.rstrip('"”’)').endswith("?"):
            continue
        for m in _NEGATION.finditer(sentence):
            # Within its clause: "no longer just text processors; they are evolving" negates
            # the processors, not the evolving.
            clause = _CLAUSE_END.split(sentence[m.end() : m.end() + 80])[0]
            after = terms(clause)[:NEGATION_SCOPE]
            # "… speak is impossible.": a negation ending its sentence bears on what came before.
            before = terms(sentence[max(0, m.start() - 80) : m.start()])[-NEGATION_SCOPE:]
            out.update(after or before)
    return frozenset(out)


def absolutes(text: str) -> frozenset[str]:
    """The absolute qualifiers of `text` ("fully", "always"), each as its group of synonyms;
    a negated one ("not fully", "isn't always") claims less, not more, and does not count."""
    found = set()
    for m in _ABSOLUTE.finditer(text):
        if not _NEGATED_BEFORE.search(text[: m.start()]):
            word = m.group(0).lower()
            # "guaranteed" is backed by "guarantee", "proves" by "proof".
            found.add(_SYNONYMS.get(word, re.sub(r"e?[sd]$", "", word) if len(word) > 5 else word))
    return frozenset(found)


# Restrictions a claim may add to what a sentence says ("can only interpolate", "already clean
# up"): each must stand in the sentence itself, in one of its wordings.
_RESTRICTION = {
    "only": "only|solely|exclusively|entirely|purely|just|merely",
    "solely": "only|solely|exclusively|entirely|purely|just|merely",
    "exclusively": "only|solely|exclusively|entirely|purely|just|merely",
    "already": "already",
    "reliably": "reliabl|robust|consistent",
}
# "only a handful of nodes" counts, it does not restrict.
_RESTRICTS = re.compile(
    r"\b(?:" + "|".join(_RESTRICTION) + r")\b"
    r"(?!\s+a\s+(?:few|handful|couple|little|small|fraction))",
    re.IGNORECASE,
)


def restrictions(text: str) -> frozenset[str]:
    """The restrictions `text` states, each as the pattern of its wordings; negated ones ("not
    only") claim less and do not count."""
    return frozenset(
        _RESTRICTION[m.group(0).lower()]
        for m in _RESTRICTS.finditer(text)
        if not _NEGATED_BEFORE.search(text[: m.start()])
    )


def lacks_restriction(wanted: frozenset[str], quote: str) -> bool:
    """Whether `quote` misses one of the qualifiers `wanted` (patterns from `restrictions` or
    `absolutes`)."""
    lowered = quote.lower()
    return any(not re.search(rf"\b(?:{r})", lowered) for r in wanted)


_NEGATING_PREFIXES = ("in", "un", "non", "im", "ir", "il", "dis")


def prefix_negated(negated: frozenset[str], have: frozenset[str]) -> frozenset[str]:
    """The `negated` terms that `have` holds with a negating prefix ("incoherently" negates
    "coherence")."""
    return frozenset(t for t in negated if any(p + t in have for p in _NEGATING_PREFIXES))


# A word negated by its prefix ("incoherently", "unrecorded") against the word itself: the
# prefixes that make an opposite, and words that only look prefixed ("improve", "instance").
_OPPOSING_PREFIX = re.compile(r"(?:un|in|non|im)([a-z]{5,})")
_NOT_PREFIXED = re.compile(
    r"im(?:prov|press|ply|plie|port|pos|plement|age)|in(?:stan|corpor|sight|terest|tend|vent|"
    r"volv|form|clud|crea|fer|duc|spir|stall|stead|side|tegr|tuit|dex|dic|put|vest|ten)|"
    r"un(?:der|iver|ique|it|ion)|non(?:e\b|theless)"
)


_NEGATED_WORD = re.compile(
    r"(?:\b(?:not|no|never|without)|n['’]t)\s+"
    r"(?:(?:be|being|been|get|gets|got|a|an|the|any|always)\s+)?"
    r"([a-z]+)"
)


def polar_words(text: str) -> frozenset[str]:
    """The words of `text` that belong to an opposite pair, by their first five letters; with
    "-" and the root for a word negated by its prefix ("incoherently": "-coher") and "+" and
    the first five letters for any other word of five letters or more ("+coher")."""
    lowered = text.lower()
    words = set(re.findall(r"[a-z]+", lowered))
    # An entry is a word's first five letters or fewer ("low", "hard"): one of its prefixes.
    polar = {w[:n] for w in words for n in range(1, 6)} & _POLAR
    # "without being recorded", "not coherent": a negation before a word is its prefix.
    negated = {m.group(1) for m in _NEGATED_WORD.finditer(lowered)}
    for w in words:
        prefixed = _OPPOSING_PREFIX.fullmatch(w)
        if prefixed and not _NOT_PREFIXED.match(w):
            polar.add("-" + prefixed.group(1)[:5])
        elif len(w) >= 5:
            polar.add(("-" if w in negated else "+") + w[:5])
    return frozenset(polar)


def opposed(claim: frozenset[str], quote: frozenset[str]) -> bool:
    """Whether the claim uses a word whose opposite the quote uses instead."""
    for word in claim & _POLAR:
        if word in quote:
            continue
        if any(other in quote and other not in claim for other in _OPPOSED[word]):
            return True
    return prefix_opposed(claim, quote)


def prefix_opposed(claim: frozenset[str], quote: frozenset[str]) -> bool:
    """Whether the claim uses a word that the quote negates by a prefix or a "not" before it,
    or the other way round ("coherent" where the quote says "incoherently")."""
    for word in claim:
        if word[0] in "+-":
            other = ("-" if word[0] == "+" else "+") + word[1:]
            if word not in quote and other in quote and other not in claim:
                return True
    return False


def has_figure(value: float, given: frozenset[float]) -> bool:
    return any(abs(value - g) <= 1e-9 * max(1.0, abs(g)) for g in given)


def mentions(lowered: str, name: str) -> bool:
    """Whether the lowercased passage names `name` (a plural "RNNs" matches "RNN" too)."""
    if _ACRONYM.fullmatch(name) and _spelled_out(lowered, name.rstrip("s")):
        return True
    name = _KIND_SUFFIX.sub("", name.lower().replace("’", "'").removesuffix("'s"))
    stems = {name, name[:-1]} if name.endswith("s") and len(name) > 3 else {name}
    return any(re.search(rf"(?<![a-z0-9]){re.escape(s)}", lowered) for s in stems)


_ACRONYM = re.compile(r"[A-Z]{2,6}s?")
# "CTF-style puzzles", "ChatGPT-like models", "GPT-4-level": the name is what comes before.
_KIND_SUFFIX = re.compile(r"-(?:style|like|based|level|type|scale|sized)$")


def _spelled_out(lowered: str, acronym: str) -> bool:
    """Whether the lowercased text spells `acronym` out ("AI": "artificial intelligence")."""
    words = r"[\s-]+".join(rf"{c.lower()}[a-z]*" for c in acronym)
    return re.search(rf"\b{words}", lowered) is not None


# Words that state a cause: after a backward one comes the cause ("X because Y"), after a
# forward one the effect ("X leads to Y").
_BACKWARD = r"because|since|due\s+to|as\s+a\s+result\s+of|thanks\s+to|owing\s+to|given\s+that"
_FORWARD = (
    r"therefore|thus|hence|lead(?:s|ing)?\s+to|led\s+to|caus(?:e|es|ed|ing)|"
    r"result(?:s|ed|ing)?\s+in|which\s+means"
)
_CAUSAL = re.compile(rf"\b(?:({_BACKWARD})|({_FORWARD}))\b", re.IGNORECASE)


def causation(text: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """The terms of the cause and of the effect `text` states first, or None without one."""
    m = _CAUSAL.search(text)
    if m is None:
        return None
    before, after = text[: m.start()], text[m.end() :]
    if m.group(1) and not terms(before) and "," in after:
        # "Because X, Y": the cause ends at the comma.
        after, before = after.split(",", 1)
    before, after = frozenset(terms(before)), frozenset(terms(after))
    return (after, before) if m.group(1) else (before, after)


# Units of time: "for an hour" where the passage says "twenty minutes" changes the figure.
_UNIT = re.compile(r"\b(second|minute|hour|day|week|month|year|decade|centur)(?:y|ies|s)?\b", re.I)


def units(text: str) -> frozenset[str]:
    """The units of time `text` measures in; a plural without a figure ("for years", "in
    recent decades") measures nothing."""
    return frozenset(
        m.group(1).lower()
        for m in _UNIT.finditer(text)
        if not m.group(0).lower().endswith("s") or figures(text[max(0, m.start() - 24) : m.start()])
    )


def reverses_cause(cause: tuple[frozenset[str], frozenset[str]], quote: str) -> bool:
    """Whether `quote` states a cause that the claim (`cause`: the terms of its cause, of its
    effect) gives as the effect ("X because Y" where it says "Y because X"). A quote stating none
    may imply it ("They mimic human reasoning" after "Decision trees are the poster child for
    interpretability"): no evidence."""
    said = causation(quote)
    if said is None or not all(said):
        return False
    return len(cause[0] & said[1]) > len(cause[0] & said[0])


# A comparison a claim makes: "more accurate than", "faster than", "outperforms", "just as well
# as". Not "more than" alone ("does more than attend", "nothing more than"), nor "rather than".
_COMPARES = re.compile(
    r"\b(?:(?:more|less|fewer)\s+(?!than\b)[a-z-]+\s+than|(?!rather\b|other\b)[a-z]+er\s+than"
    r"|outperform\w*|surpass\w*|(?:just\s+)?as\s+well\s+as|superior\s+to|inferior\s+to"
    r"|on\s+par\s+with)\b",
    re.IGNORECASE,
)
# Words by which a passage compares things; any of them leaves a claim's comparison to the
# other checks.
_COMPARING = re.compile(
    r"\b(?:than|outperform\w*|surpass\w*|as\s+well\s+as|superior|inferior|on\s+par|rival\w*"
    r"|match\w*|beat\w*|exceed\w*|compet\w*|compar\w*)\b",
    re.IGNORECASE,
)


def comparisons(text: str) -> frozenset[str]:
    """The comparisons `text` makes, as written ("more accurate than", "outperform")."""
    return frozenset(m.group(0).lower() for m in _COMPARES.finditer(text))


def compares(wanted: frozenset[str], lowered: str) -> bool:
    """Whether a passage (`lowered`) compares things at all, or uses the claim's own "-er"
    word ("thousands of times longer" for "longer than its training sequences")."""
    if not wanted or _COMPARING.search(lowered):
        return True
    own = {w.split()[0] for w in wanted} - {"more", "less", "fewer"}
    return any(re.search(rf"\b{re.escape(w)}\b", lowered) for w in own if w.endswith("er"))


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)]|#+)\s+")
# Markdown emphasis a model may use ("**Answer:** …", "`BERT`"): not part of what it claims.
_EMPHASIS = re.compile(r"\*\*|__|(?<!\w)[*_`]|[*_`](?!\w)")
# "The summary says that …", "According to the paper, …": who says it is not part of the claim.
_META = re.compile(
    r"^(?:according to the (?:summary|paper|text|authors?),?\s*|the (?:summary|paper|text|"
    r"authors?|article|title|example)\s+(?:says|states|claims|reports|notes|argues|concludes|"
    r"shows|describes|suggests|explains|writes|mentions|finds)\s+(?:that\s+)?)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Claim:
    """A claim's text without markers or "the summary says", and what the checks look for."""

    text: str
    terms: frozenset[str]
    numbers: frozenset[float]
    names: tuple[str, ...]
    negated: frozenset[str]  # its terms that a negation bears on
    absolutes: frozenset[str]
    polar: frozenset[str]  # its words of the opposite pairs, before any "rather than"
    cause: tuple[frozenset[str], frozenset[str]] | None  # the terms of a cause, of its effect
    units: frozenset[str]  # units of time it measures in
    restrictions: frozenset[str]  # "only", "already": patterns the quote must match
    comparisons: frozenset[str] = frozenset()  # "more accurate than", "outperform"


def strip_markers(text: str, *, emphasis: bool = True) -> str:
    """`text` without its `[n]` markers, a list item's bullet or (with `emphasis`) Markdown
    emphasis."""
    bare = _BULLET.sub("", without_markers(text))
    return (_EMPHASIS.sub("", bare) if emphasis else bare).strip()


# A summary said to settle a finding ("The summary confirms that…", "the paper concludes
# that…", "has been definitively explained") claims more than one that raises, asks or hopes for
# it: the passage must itself speak of showing, proving or concluding. ("The paper shows that…"
# is as often a way of saying "says", so it does not count.) Kept as one group of wordings.
_ESTABLISHED = re.compile(
    r"\b(?:(?:summary|paper|text|article|piece|authors?|work|study)\s+(?:confirms|confirmed|"
    r"establishes|established|concludes|concluded|proves|proved)|definitively|conclusively)\b",
    re.IGNORECASE,
)
_ESTABLISHING = "show|demonstrat|confirm|establish|conclu|prov|proof|definitiv"


def parse_claim(claim: str) -> Claim:
    """What the checks look for in a claim."""
    plain = strip_markers(claim)
    text = _META.sub("", plain).strip()
    if text[:1].islower():
        text = text[0].upper() + text[1:]
    established = {_ESTABLISHING} if _ESTABLISHED.search(plain) else set()
    return Claim(
        text,
        frozenset(terms(text)),
        figures(text),
        names(text),
        negated_terms(text),
        absolutes(text) | established,
        # "amplifies noise rather than cancelling it" asserts the first half only.
        polar_words(CONTRAST.split(text)[0]),
        causation(text),
        units(text),
        restrictions(text),
        comparisons(text),
    )
