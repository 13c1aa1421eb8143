"""`validation.check_storable`: what PostgreSQL text / jsonb cannot hold (NUL characters, integers past 64
bits) is refused with the path to it, and everything else passes, whichever way it was checked."""

from __future__ import annotations

from typing import Any

import pytest

from agentkb.errors import BadRequest
from agentkb.validation import check_storable


@pytest.mark.parametrize(
    "value",
    [
        [{"id": 1, "body": "text", "topic": None}],
        {"n": 2**63 - 1, "m": -(2**63), "k": 2**53 + 1, "f": 1.5, "b": True},
        {"escaped": "a literal \\u0000 is not a NUL", "nested": [{"x": ["\\u0000"]}]},
        {"deep": [[[[{"a": "é😀"}]]]]},
    ],
)
def test_storable_values_pass(value: Any) -> None:
    assert check_storable(value, "rows") is value


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ([{"id": 1}, {"id": 2**63}], "'rows[1].id' is an integer beyond 64 bits"),
        ([{"id": -(2**63) - 1}], "'rows[0].id' is an integer beyond 64 bits"),
        ({"a": {"b": ["x", "y\x00"]}}, "'rows.a.b[1]' contains a NUL character"),
        ({"k\x00": 1}, "'rows' contains a NUL character"),
        ([{"id": 2**70, "s": "\\u0000"}], "'rows[0].id' is an integer beyond 64 bits"),
    ],
)
def test_unstorable_values_are_refused_with_their_path(value: Any, detail: str) -> None:
    with pytest.raises(BadRequest) as refused:
        check_storable(value, "rows")
    assert refused.value.detail == detail
