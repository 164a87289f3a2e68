"""What a question says about the papers it wants: authors, a year, a venue.

"Papers by Ding in 2021", "What did Ding and colleagues propose?", "work at ICLR": a collection of
records that carry `authors`, `year` and `venue` can be narrowed from the question itself, as
`--where` would. A name, year or venue narrows only when the collection holds it; anything else
("by gradient descent", a year no record has) leaves the search as it is.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Metadata keys read as a record's authors, publication year and venue.
AUTHOR_KEYS = ("authors", "author")
YEAR_KEY = "year"
VENUE_KEY = "venue"

_NAME_WORD = r"[^\W\d_][\w'’.\-]*"
_NAME = rf"{_NAME_WORD}(?:\s+{_NAME_WORD}){{0,3}}"
# Phrases that name a paper's authors: the name is the group "name"; the first flag says whether
# it ends the group ("Ding et al.") rather than starting it ("by Ding in 2021"), the second that
# the phrase is weak evidence: "by Fisher information" is no author, so after "by" and "from" a
# surname that is also a common word of the collection's text is not read as one.
_AUTHOR_PHRASES = [
    (re.compile(rf"\b(?:by|from)\s+(?P<name>{_NAME})", re.IGNORECASE), False, True),
    (re.compile(rf"(?P<name>{_NAME})\s+et\.?\s+al\b", re.IGNORECASE), True, False),
    (
        re.compile(
            rf"(?P<name>{_NAME})\s+(?:and|&|with)\s+(?:(?:his|her|their)\s+)?"
            r"(?:colleagues|co-?authors|collaborators|coworkers|co-workers|team|students)\b",
            re.IGNORECASE,
        ),
        True,
        False,
    ),
    (
        re.compile(rf"(?P<name>{_NAME})[’']s?\s+(?:paper|papers|work|works|group|team|lab)\b"),
        True,
        False,
    ),
]
_WORD_RUN = re.compile(rf"{_NAME_WORD}(?:\s+{_NAME_WORD})*")
_AND = re.compile(r"\s+(?:and|&)\s+", re.IGNORECASE)
_YEAR = re.compile(
    r"\b(?P<before>in|from|of|during|since|after|before|until|till|year|published)?\s*"
    r"(?P<year>(?:19|20)\d\d)\b(?P<papers>\s+(?:papers?|works?|submissions?))?",
    re.IGNORECASE,
)
_YEARS = re.compile(
    r"\b(?:from|between)\s+(?P<low>(?:19|20)\d\d)\s*(?:to|and|-|–|until)\s*"
    r"(?P<high>(?:19|20)\d\d)\b",
    re.IGNORECASE,
)
_YEAR_OPS = {"since": ">=", "after": ">", "before": "<", "until": "<=", "till": "<="}


def _fold(text: str) -> str:
    """Lowercase, accents removed, single spaces: how names are compared."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    return " ".join(text.replace("’", "'").lower().split())


def split_authors(value: Any) -> list[str]:
    """The author names in a metadata value ("A, B and C", or a list)."""
    if isinstance(value, list):
        parts = [str(v) for v in value]
    else:
        parts = re.split(r"\s*[,;]\s*|\s+and\s+", str(value or ""))
    return [" ".join(p.split()) for p in parts if p and p.strip()]


def facets(docs: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Authors, years and venues of the collection, each with its documents, as plain JSON.

    `docs` gives (document id, metadata) pairs; a document may appear once per passage.
    """
    authors: dict[str, set[str]] = {}
    values: dict[str, dict[str, tuple[Any, set[str]]]] = {YEAR_KEY: {}, VENUE_KEY: {}}
    for doc_id, meta in docs:
        for key in AUTHOR_KEYS:
            for name in split_authors(meta.get(key)):
                authors.setdefault(name, set()).add(doc_id)
        for key, seen in values.items():
            value = meta.get(key)
            if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
                seen.setdefault(repr(value), (value, set()))[1].add(doc_id)
    out: dict[str, Any] = {"authors": {n: sorted(d) for n, d in sorted(authors.items())}}
    for key, seen in values.items():
        out[key] = [[value, sorted(ids)] for value, ids in seen.values()]
    return out


def about(meta: Mapping[str, Any]) -> str:
    """A record's authors, venue and year as text: what its keyword "meta" field indexes."""
    parts = [", ".join(split_authors(meta.get(key))) for key in AUTHOR_KEYS]
    parts += [str(meta.get(key, "")) for key in (VENUE_KEY, YEAR_KEY)]
    return " ".join(p for p in parts if p)


@dataclass(frozen=True)
class Narrowing:
    """The filter a question implies: a Chroma `where`, the documents it allows, and its reading."""

    where: dict[str, Any]
    doc_ids: frozenset[str]
    said: tuple[str, ...]  # e.g. ("authors: Hu Ding", "year = 2021")
    # The names, years and venues as the question wrote them; what remains is its topic.
    named: tuple[str, ...] = ()

    @property
    def by_author(self) -> bool:
        """True when the question names authors of the collection."""
        return any(s.startswith("authors:") for s in self.said)


@dataclass
class Facets:
    """A collection's authors, years and venues, ready to read questions against."""

    authors: dict[str, frozenset[str]] = field(default_factory=dict)
    years: dict[int, frozenset[str]] = field(default_factory=dict)
    venues: dict[str, tuple[Any, frozenset[str]]] = field(default_factory=dict)
    _full: dict[str, str] = field(default_factory=dict)  # folded full name -> name
    _surnames: dict[str, list[str]] = field(default_factory=dict)  # folded surname -> names

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Facets:
        """Facets from what `facets` produced (an index without any gives empty facets)."""
        data = data or {}
        out = cls()
        for name, ids in (data.get("authors") or {}).items():
            out.authors[name] = frozenset(ids)
            out._full.setdefault(_fold(name), name)
            out._surnames.setdefault(_fold(name).split()[-1], []).append(name)
        for value, ids in data.get(YEAR_KEY) or []:
            if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
                out.years[int(value)] = out.years.get(int(value), frozenset()) | frozenset(ids)
        for value, ids in data.get(VENUE_KEY) or []:
            if isinstance(value, str) and value.strip():
                out.venues[_fold(value)] = (value, frozenset(ids))
        return out

    def __bool__(self) -> bool:
        return bool(self.authors or self.years or self.venues)

    def by_one_author(self, where: dict[str, Any]) -> dict[str, Any]:
        """`where` with `authors=NAME` matching each paper NAME is one author of, not only those
        whose whole author list is NAME (`!=` likewise leaves out each of NAME's papers)."""
        if "$and" in where or "$or" in where:
            op = "$and" if "$and" in where else "$or"
            return {op: [self.by_one_author(part) for part in where[op]]}
        key, value = next(iter(where.items()))
        op, name = next(iter(value.items())) if isinstance(value, dict) else ("$eq", value)
        full = self._full.get(_fold(name)) if isinstance(name, str) else None
        if key not in AUTHOR_KEYS or op not in ("$eq", "$ne") or full is None:
            return where
        ids = sorted(self.authors[full])
        return {"doc_id": {"$in" if op == "$eq" else "$nin": ids}}

    def narrowing(
        self, question: str, common: Callable[[str], bool] = lambda word: False
    ) -> Narrowing | None:
        """The filter `question` implies in this collection, or None when it names nothing here.

        `common` tells a common word of the collection's text ("Data", "Fisher"), which is read
        as a surname only with strong evidence ("Fisher et al.", "Fisher and colleagues").
        """
        if not self:
            return None
        found = [
            self._authors_in(question, common),
            self._venue_in(question),
            self._years_in(question),
        ]
        parts = [f for f in found if f is not None]
        if not parts:
            return None
        # Conditions are kept in this order while some document still meets all of them: a
        # named author without a paper in the named year keeps the author's papers.
        where, allowed, said = [parts[0][0]], parts[0][1], [parts[0][2]]
        for cond, ids, text in parts[1:]:
            if allowed & ids:
                where.append(cond)
                allowed &= ids
                said.append(text)
        names = self._names(question, common)
        named = tuple(name for group in names for name in group) + tuple(said)
        return Narrowing(
            where[0] if len(where) == 1 else {"$and": where},
            frozenset(allowed),
            tuple(said),
            named,
        )

    def _authors_in(self, question: str, common: Callable[[str], bool]):
        names = self._names(question, common)
        if not names:
            return None
        groups = [frozenset().union(*(self.authors[n] for n in group)) for group in names]
        allowed = frozenset.intersection(*groups)
        if not allowed:  # "Ding and Wang" who never wrote together: either one's papers
            allowed = frozenset().union(*groups)
        shown = ", ".join(" or ".join(group) for group in names)
        return {"doc_id": {"$in": sorted(allowed)}}, allowed, f"authors: {shown}"

    def _names(self, question: str, common: Callable[[str], bool]) -> list[list[str]]:
        """Each author the question names, as the known full names it may mean."""
        groups: dict[tuple[str, ...], None] = {}
        # A full name anywhere ("What did Hu Ding propose?"), of two to four words.
        for run in _WORD_RUN.finditer(question):
            words = run.group().split()
            for size in range(min(len(words), 4), 1, -1):
                for start in range(len(words) - size + 1):
                    name = self._full.get(_fold(" ".join(words[start : start + size])))
                    if name:
                        groups[(name,)] = None
        # A surname after "by", before "et al.", "and colleagues", "'s paper".
        for pattern, from_end, weak in _AUTHOR_PHRASES:
            for match in pattern.finditer(question):
                # "by Ding and Wang": each name in turn.
                for part in _AND.split(match.group("name")):
                    groups.update(
                        dict.fromkeys(self._match_name(part, from_end, common if weak else None))
                    )
        # A name given in full also matches by its surname: keep the full name only.
        full = {g[0] for g in groups if len(g) == 1}
        return [list(g) for g in groups if len(g) == 1 or not full & set(g)]

    def _match_name(
        self, text: str, from_end: bool, common: Callable[[str], bool] | None
    ) -> list[tuple[str, ...]]:
        """The known names `text` starts with (after "by") or ends with (before "et al.")."""
        words = text.split()
        for size in range(min(len(words), 4), 0, -1):
            part = words[-size:] if from_end else words[:size]
            if size > 1:
                name = self._full.get(_fold(" ".join(part)))
                if name:
                    return [(name,)]
            elif part[0][:1].isupper() and not (common and common(part[0])):
                # A surname is written with a capital.
                names = self._surnames.get(_fold(part[0]))
                if names:
                    return [tuple(sorted(names))]
        return []

    def _venue_in(self, question: str):
        if len(self.venues) < 2:
            return None  # one venue (or none): naming it narrows nothing
        folded = _fold(question)
        for key, (value, ids) in self.venues.items():
            if re.search(rf"\b{re.escape(key)}\b", folded):
                return {VENUE_KEY: value}, ids, f"venue: {value}"
        return None

    def _years_in(self, question: str):
        if not self.years:
            return None
        if span := _YEARS.search(question):
            # "from 2020 to 2022", "between 2021 and 2023": both ends included.
            low, high = sorted(int(span.group(g)) for g in ("low", "high"))
            years = [y for y in self.years if low <= y <= high]
            if years:
                ids = frozenset().union(*(self.years[y] for y in years))
                cond = {"$and": [{YEAR_KEY: {"$gte": low}}, {YEAR_KEY: {"$lte": high}}]}
                return cond, ids, f"year {low}–{high}"
        for match in _YEAR.finditer(question):
            word = (match.group("before") or "").lower()
            year = int(match.group("year"))
            if not word and not match.group("papers") and not self._after_venue(question, match):
                continue
            op = _YEAR_OPS.get(word, "=")
            years = [y for y in self.years if _compare(y, op, year)]
            if not years or (op == "=" and year not in self.years):
                continue
            ids = frozenset().union(*(self.years[y] for y in years))
            cond = {YEAR_KEY: year} if op == "=" else {YEAR_KEY: {_CHROMA_OPS[op]: year}}
            return cond, ids, f"year {op} {year}"
        return None

    def _after_venue(self, question: str, match: re.Match) -> bool:
        before = _fold(question[: match.start("year")]).split()
        return bool(before) and before[-1] in self.venues


_CHROMA_OPS = {">=": "$gte", ">": "$gt", "<": "$lt", "<=": "$lte"}


def _compare(a: int, op: str, b: int) -> bool:
    return {
        "=": a == b,
        ">=": a >= b,
        ">": a > b,
        "<": a < b,
        "<=": a <= b,
    }[op]
