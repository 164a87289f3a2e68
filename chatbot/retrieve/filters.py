"""What a search may ask: `k` and a `where` filter, checked before use.

Chroma answers a bad filter with a bare `ValueError`, or with nothing at all (a field no document
has, a number compared with text): these checks turn each case into one `OptionError` that names
what is allowed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from typing import Any

from chatbot.errors import ChatbotError, OptionError

MAX_K = 100  # passages per search; far more than a prompt holds, enough for `chatbot retrieve`
# Chroma stores integers in 64 bits; a larger one matches nothing or fails.
_INT64 = 2**63
_OPERATORS = {
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$in",
    "$nin",
    "$contains",
    "$not_contains",
}
_ORDERING = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def check_k(k: Any) -> None:
    """Raise OptionError unless `k` is None (the default) or a whole number from 1 to MAX_K."""
    if k is None:
        return
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        shown = repr(k) if len(repr(k)) <= 24 else repr(k)[:24] + "…"
        raise OptionError(
            f"k (-k, the number of passages) must be a whole number from 1 to {MAX_K}; got {shown}."
        )


def conditions(where: Any) -> Iterator[tuple[str, str, Any]]:
    """(field, operator, value) for each condition of a Chroma `where` filter."""
    if not isinstance(where, dict) or not where:
        raise OptionError(f"A where filter is a non-empty dict like {{'year': 2023}}: {where!r}.")
    for key, value in where.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise OptionError(f"{key} takes a non-empty list of conditions; got {value!r}.")
            for part in value:
                yield from conditions(part)
        elif isinstance(value, dict):
            if len(value) != 1 or next(iter(value)) not in _OPERATORS:
                allowed = ", ".join(sorted(_OPERATORS))
                raise OptionError(f"The condition on {key!r} must use one of {allowed}: {value!r}.")
            op, operand = next(iter(value.items()))
            yield key, op, operand
        else:
            yield key, "$eq", value


def check_where(where: dict | None) -> None:
    """Raise OptionError for a filter Chroma would reject or could never match."""
    if where is None:
        return
    for key, op, value in conditions(where):
        values = value if op in ("$in", "$nin") and isinstance(value, list) else [value]
        for v in values:
            _check_value(key, op, v)


def _check_value(key: str, op: str, value: Any) -> None:
    if op in _ORDERING and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise OptionError(
            f"{_ORDERING[op]} on {key!r} compares numbers, and {value!r} is not one: write e.g. "
            f"{key}>=2023."
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise OptionError(f"The value for {key!r} must be a finite number or text; got {value!r}.")
    if isinstance(value, int) and not isinstance(value, bool) and not -_INT64 <= value < _INT64:
        raise OptionError(f"The number for {key!r} is out of range (64-bit integers only).")
    if not isinstance(value, str | int | float | bool):
        raise OptionError(
            f"The value for {key!r} must be text, a number or true/false; got {value!r}."
        )


_ONE = {"numbers": "a number", "text": "text", "true/false": "true/false"}


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    return "numbers" if isinstance(value, int | float) else "text"


def explain_no_match(where: dict, metadatas: Iterable[dict[str, Any] | None]) -> None:
    """Raise OptionError when `where` names a field no passage has, or compares the wrong kind."""
    kinds: dict[str, set[str]] = {}
    for meta in metadatas:
        for field, value in (meta or {}).items():
            kinds.setdefault(field, set()).add(_kind(value))
    for key, op, value in conditions(where):
        if key not in kinds:
            known = ", ".join(sorted(kinds)[:15]) or "none"
            raise OptionError(
                f"No document has the field {key!r}, so the filter matches nothing. "
                f"Fields in this collection: {known}."
            )
        values = value if isinstance(value, list) else [value]
        wrong = next((v for v in values if _kind(v) not in kinds[key]), None)
        if wrong is not None and op not in ("$ne", "$nin"):
            held = " and ".join(sorted(kinds[key]))
            if "numbers" in kinds[key]:
                hint = f"{key}=2023"
            elif "text" in kinds[key]:
                hint = f'{key}="{wrong}"'
            else:
                hint = f"{key}=true"
            raise OptionError(
                f"The field {key!r} holds {held}, so {wrong!r} ({_ONE[_kind(wrong)]}) matches "
                f"nothing: write e.g. {hint}."
            )


# `--where` conditions as the command line writes them, and the Chroma operator each becomes.
_WRITTEN_OPERATORS = {">=": "$gte", "<=": "$lte", "!=": "$ne", ">": "$gt", "<": "$lt", "=": "$eq"}
_CONDITION = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*(>=|<=|!=|>|<|=)\s*(.*?)\s*$")
_INTEGER = re.compile(r"^[+-]?\d+$")
_DECIMAL = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_QUOTED = re.compile(r"^([\"'])(.*)\1$", re.DOTALL)
_FORMS = "KEY=VALUE, KEY!=VALUE, KEY>N, KEY>=N, KEY<N or KEY<=N"


def _value(raw: str) -> Any:
    """A number when `raw` is written as one, true/false as such, else text ("…" forces text)."""
    quoted = _QUOTED.match(raw)
    if quoted:
        return quoted.group(2)
    if _INTEGER.match(raw):
        return int(raw)
    if _DECIMAL.match(raw):
        return float(raw)
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    return raw


def parse_where(conditions: list[str] | None) -> dict[str, Any] | None:
    """A Chroma `where` filter from `key=value` conditions (also >=, <=, !=, >, <), all ANDed.

    Numeric values compare as numbers: `year=2023` matches the integer 2023; `key="2023"` is text.
    """
    parts: list[dict[str, Any]] = []
    for condition in conditions or []:
        match = _CONDITION.match(condition)
        if not match or not match.group(3):
            raise OptionError(
                f"--where {condition!r} is not a condition: write {_FORMS}, e.g. --where year=2023."
            )
        key, op, raw = match.groups()
        if raw[0] in "=<>!":
            raise OptionError(
                f"--where {condition!r}: the value {raw!r} starts with an operator; write "
                f"{_FORMS}, e.g. year>=2023."
            )
        part = {key: _value(raw)} if op == "=" else {key: {_WRITTEN_OPERATORS[op]: _value(raw)}}
        try:
            check_where(part)
        except ChatbotError as e:
            reason = str(e)
            raise OptionError(f"--where {condition!r}: {reason[:1].lower()}{reason[1:]}") from None
        parts.append(part)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}
