"""Metadata filters → a SQL condition over a chunk table (pure; keys and values are bound parameters).

Filters arrive as anything shaped like `kb.filters.Filter` (the `FilterLike` protocol), so storage needs
no import from the layers above it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from agentkb.errors import BadRequest


class FilterLike(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def op(self) -> str: ...
    @property
    def value(self) -> Any: ...


_NUMBER_TEXT = r"^\s*-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?\s*$"
_COMPARE = {"=": "=", "!=": "IS DISTINCT FROM", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_COLUMNS = {"id": "doc_id", "chunk_id": "chunk_id"}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _Compiler:
    def __init__(self) -> None:
        self.params: dict[str, Any] = {}

    def bind(self, value: Any) -> str:
        name = f"f{len(self.params)}"
        self.params[name] = value
        return f":{name}"

    def text_expr(self, key: str) -> str:
        column = _COLUMNS.get(key)
        return column if column else f"(metadata ->> CAST({self.bind(key)} AS text))"

    def number_expr(self, key: str) -> str:
        column = _COLUMNS.get(key)
        if column:
            return f"(CASE WHEN {column} ~ '{_NUMBER_TEXT}' THEN CAST({column} AS float8) END)"
        k = self.bind(key)
        text_value = f"(metadata ->> CAST({k} AS text))"
        return f"(CASE WHEN {text_value} ~ '{_NUMBER_TEXT}' THEN CAST({text_value} AS float8) END)"

    def condition(self, f: FilterLike) -> str:
        op, value = f.op, f.value
        if op in ("is null", "is not null"):
            return f"{self.text_expr(f.key)} {op.upper()}"
        if op in ("in", "not in"):
            values = list(value) if isinstance(value, (list, tuple)) else [value]
            if values and all(_is_number(v) for v in values):
                expr, bound = self.number_expr(f.key), self.bind([float(v) for v in values])
                return f"{'NOT ' if op == 'not in' else ''}COALESCE({expr} = ANY(CAST({bound} AS float8[])), false)"
            expr, bound = self.text_expr(f.key), self.bind([_scalar(v) for v in values])
            return f"{'NOT ' if op == 'not in' else ''}COALESCE({expr} = ANY(CAST({bound} AS text[])), false)"
        if op in ("like", "not like"):
            if not isinstance(value, str):
                raise BadRequest(f"LIKE on '{f.key}' needs a string pattern", title="Invalid filter")
            return f"COALESCE({self.text_expr(f.key)} {op.upper()} {self.bind(value)}, {'true' if op == 'not like' else 'false'})"
        if op not in _COMPARE:
            raise BadRequest(f"Unsupported filter operator {op!r} on '{f.key}'", title="Invalid filter")
        if value is None:
            return f"{self.text_expr(f.key)} {'IS NULL' if op == '=' else 'IS NOT NULL'}"
        if _is_number(value):
            return f"{self.number_expr(f.key)} {_COMPARE[op]} {self.bind(float(value))}"
        return f"{self.text_expr(f.key)} {_COMPARE[op]} {self.bind(_scalar(value))}"


def compile_filters(filters: Sequence[FilterLike]) -> tuple[str, dict[str, Any]]:
    """(`condition`, params): `TRUE` when there are no filters. Numbers compare numerically (metadata
    strings that look like numbers included), everything else as text; `id` is the document id and
    `chunk_id` the chunk id; `!=` keeps chunks that lack the key."""
    compiler = _Compiler()
    conditions = [compiler.condition(f) for f in filters]
    return (" AND ".join(conditions) if conditions else "TRUE"), compiler.params
