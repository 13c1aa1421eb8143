"""Checks shared by the services: names, references, storable JSON. (Masking secrets: `secrecy`.)"""

from __future__ import annotations

import re
from typing import Any

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
    refuse both instead of failing later."""
    if isinstance(value, str):
        if "\x00" in value:
            raise BadRequest(f"'{field}' contains a NUL character", title="Invalid value")
    elif isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
        raise BadRequest(f"'{field}' is an integer beyond 64 bits", title="Invalid value")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_storable(key, field)
            check_storable(item, f"{field}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_storable(item, f"{field}[{index}]")
    return value


def check_dict(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest(f"'{field}' must be a JSON object", title="Invalid value")
    return check_storable(value, field)  # type: ignore[no-any-return]


def check_str_list(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise BadRequest(f"'{field}' must be a list of non-empty strings", title="Invalid value")
    return check_storable(value, field)  # type: ignore[no-any-return]
