"""Checks shared by the services: names, references, storable JSON. (Masking secrets: `secrecy`.)"""

from __future__ import annotations

import re
from typing import Any

import orjson

from agentkb.errors import BadRequest

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_NAME = 64


def is_identifier(value: object) -> bool:
    return isinstance(value, str) and len(value) <= MAX_NAME and IDENTIFIER.match(value) is not None


def check_name(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise BadRequest(f"'{field}' is required and must be a non-empty string", title="Missing field")
    if not is_identifier(value):
        raise BadRequest(
            f"'{field}' must start with a letter or underscore, contain only letters, digits and "
            f"underscores, and be at most {MAX_NAME} characters; got {value!r}",
            title="Invalid name",
        )
    return value


INT64 = (-(2**63), 2**63 - 1)


def check_storable(value: Any, field: str) -> Any:
    """PostgreSQL text and jsonb cannot hold NUL characters, and stored JSON holds 64-bit integers at most:
    refuse both instead of failing later. A value that JSON holds with integers of 53 bits at most and no
    escaped NUL is storable (orjson tells at C speed); any other is walked to name what is wrong, if anything."""
    try:
        if b"\\u0000" not in orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER):
            return value
    except TypeError:  # orjson.JSONEncodeError: a larger integer, a key that is not text, another type
        pass
    problem = _unstorable(value)
    if problem is not None:
        path, what = problem
        raise BadRequest(f"'{field}{path}' {what}", title="Invalid value")
    return value


def _unstorable(value: Any) -> tuple[str, str] | None:
    """(the path below the value, what is wrong) of the first part that cannot be stored; the path is
    only built for a value refused (a large request is walked once, cheaply)."""
    if isinstance(value, str):
        return ("", "contains a NUL character") if "\x00" in value else None
    if isinstance(value, int):
        return None if INT64[0] <= value <= INT64[1] else ("", "is an integer beyond 64 bits")
    if isinstance(value, dict):
        for key, item in value.items():
            problem = _unstorable(key)
            if problem is not None:
                return "", problem[1]
            if type(item) is str and "\x00" not in item:
                continue
            problem = _unstorable(item)
            if problem is not None:
                return f".{key}{problem[0]}", problem[1]
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if type(item) is str and "\x00" not in item:
                continue
            problem = _unstorable(item)
            if problem is not None:
                return f"[{index}]{problem[0]}", problem[1]
    return None


def check_dict(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest(f"'{field}' must be a JSON object", title="Invalid value")
    return check_storable(value, field)  # type: ignore[no-any-return]


def check_str_list(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise BadRequest(f"'{field}' must be a list of non-empty strings", title="Invalid value")
    return check_storable(value, field)  # type: ignore[no-any-return]
