"""Parsed statements, cached by shape: MindsDB's parser takes milliseconds, and the statements a client
sends again and again (a KB search) differ only in their string constants.

A SELECT's simple string literals (`'...'` holding no quote or backslash) are lifted out as `:name`
parameters; the rest of the text is the key. The first time a shape is seen both texts are parsed and the
shape is kept only if binding the literals back gives the very statement the parser gives for the
original (so a literal where a parameter would read differently is never cached). Later, a copy of the
kept tree with the literals bound in is the parse. Statements with comments, quoted identifiers,
placeholders or escapes are parsed as they are.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any

from mindsdb_sql_parser import ast, parse_sql

from agentkb.sql import params as sql_params

MAX_SHAPES = 512
_LITERAL = re.compile(r"'([^'\\]*)'")
_UNSAFE = ('"', "`", "--", "/*", "\\", ":", "?", "@", "'")
_PREFIX = "agentkb_literal_"


class StatementCache:
    def __init__(self, size: int = MAX_SHAPES) -> None:
        self.size = size
        self._shapes: OrderedDict[str, ast.ASTNode | None] = OrderedDict()

    def parse(self, sql: str) -> ast.ASTNode:
        """`parse_sql(sql)`, from the cache when a statement of this shape was parsed before."""
        shape = _shape(sql)
        if shape is None:
            return parse_sql(sql)
        template, values = shape
        if template in self._shapes:
            self._shapes.move_to_end(template)
            tree = self._shapes[template]
            if tree is None:
                return parse_sql(sql)
            return sql_params.bind(_clone(tree), values)
        parsed = parse_sql(sql)  # an error here is the caller's, as without the cache
        kept: ast.ASTNode | None = None
        try:
            tree = parse_sql(template)
            if sql_params.bind(_clone(tree), values) == parsed:
                kept = tree
        except Exception:  # noqa: BLE001 - a shape the parser does not take as parameters is not cached
            kept = None
        self._shapes[template] = kept
        if len(self._shapes) > self.size:
            self._shapes.popitem(last=False)
        return parsed


def _shape(sql: str) -> tuple[str, dict[str, str]] | None:
    """(the text with its string literals as `:agentkb_literal_<i>`, their values), or None when the
    statement is not a plain SELECT."""
    if sql.lstrip()[:6].lower() != "select":
        return None
    values: dict[str, str] = {}

    def lift(match: re.Match[str]) -> str:
        name = f"{_PREFIX}{len(values)}"
        values[name] = match.group(1)
        return f":{name}"

    template = _LITERAL.sub(lift, sql)
    rest = template.replace(f":{_PREFIX}", "")
    if not values or any(token in rest for token in _UNSAFE):
        return None
    return template, values


def _clone(value: Any) -> Any:
    """A copy of a parsed tree: its nodes, lists, tuples and dicts copied, leaves shared (faster than
    `copy.deepcopy`, which the tree's plain attributes do not need)."""
    if isinstance(value, ast.ASTNode):
        node = object.__new__(type(value))
        node.__dict__.update({k: _clone(v) for k, v in value.__dict__.items()})
        return node
    if isinstance(value, list):
        return [_clone(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value
