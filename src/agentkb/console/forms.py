"""Reading the console's HTML form fields (all text) into the values the services take."""

from __future__ import annotations

import json
import re
from typing import Any

from agentkb.errors import BadRequest
from agentkb.service.types import Filter, FilterOp

FILTER_LINE = re.compile(r"^\s*([^\s=!<>]+)\s*(=|!=|<>|>=|<=|>|<|not in|in|not like|like)\s*(.+?)\s*$", re.I)


def text(value: str | None) -> str | None:
    """A field's text, stripped; None when empty."""
    stripped = (value or "").strip()
    return stripped or None


def names(value: str | None) -> list[str] | None:
    """A comma- or line-separated list of names; None when empty."""
    items = [part.strip() for part in re.split(r"[,\n]", value or "") if part.strip()]
    return items or None


def json_object(value: str | None, field: str) -> dict[str, Any] | None:
    """A JSON object typed into a text area; None when empty."""
    given = text(value)
    if given is None:
        return None
    try:
        parsed = json.loads(given)
    except json.JSONDecodeError as exc:
        raise BadRequest(f"{field} must be a JSON object: {exc.msg}", title="Invalid form field") from exc
    if not isinstance(parsed, dict):
        raise BadRequest(f"{field} must be a JSON object", title="Invalid form field")
    return parsed


def integer(value: str | None, field: str, *, minimum: int = 0, default: int | None = None) -> int | None:
    given = text(value)
    if given is None:
        return default
    try:
        number = int(given)
    except ValueError as exc:
        raise BadRequest(f"{field} must be a whole number", title="Invalid form field") from exc
    if number < minimum:
        raise BadRequest(f"{field} must be at least {minimum}", title="Invalid form field")
    return number


def number(value: str | None, field: str) -> float | None:
    given = text(value)
    if given is None:
        return None
    try:
        return float(given)
    except ValueError as exc:
        raise BadRequest(f"{field} must be a number", title="Invalid form field") from exc


def _value(raw: str) -> Any:
    """A filter's value: JSON when it reads as JSON (numbers, quoted strings, lists), else the text."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def filters(value: str | None) -> tuple[Filter, ...]:
    """Metadata filters, one a line: `key = value`, `key > 3`, `key in ["a", "b"]`, `key like 'a%'`."""
    found: list[Filter] = []
    for line in (value or "").splitlines():
        if not line.strip():
            continue
        match = FILTER_LINE.match(line)
        if match is None:
            raise BadRequest(
                f"Cannot read the filter {line.strip()!r}: write one a line, as `key = value`, `key > 3` or "
                '`key in ["a", "b"]`',
                title="Invalid filter",
            )
        key, op, raw = match.group(1), match.group(2).lower(), match.group(3)
        op = "!=" if op == "<>" else op
        given = _value(raw)
        if isinstance(given, str) and len(given) >= 2 and given[0] == given[-1] == "'":
            given = given[1:-1]
        if op in ("in", "not in"):
            if not isinstance(given, list):
                raise BadRequest(f"{key} {op} needs a JSON list, e.g. [1, 2]", title="Invalid filter")
            given = tuple(given)
        found.append(Filter(key, _op(op), given))
    return tuple(found)


def _op(op: str) -> FilterOp:
    return op  # type: ignore[return-value]  # FILTER_LINE admits only FilterOp's operators
