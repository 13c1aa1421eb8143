"""MindsDB's `LAST` in a job's SELECT: `WHERE <column> > LAST` reads only the rows past the largest value of
that column the job's previous successful run read.

How a run resolves it (`resolve`), per condition of the statement's SELECT (an `INSERT ... SELECT`'s or a
plain SELECT's WHERE), keyed by the statement's place in the job and the condition's text:

1. the previous value, if there is one, takes LAST's place; on the first run a bare `column > LAST` is dropped
   (the first run reads everything: the issue's rule for agentkb; MindsDB starts a bare LAST at the column's
   current largest value, so its first run reads nothing) and `COALESCE(LAST, v)` becomes `COALESCE(NULL, v)`;
2. `SELECT MAX(column) FROM <the same FROM> WHERE <that WHERE>` is asked first, and the statement then reads
   up to it (`AND column <= max`): rows that arrive while the run reads are left for the next run, which
   starts exactly where this one ended, instead of being read by this one and counted or not by chance;
3. the new values are kept by the caller only if the whole run succeeds (`pending`).

Supported forms: `column > LAST`, `column >= LAST`, and LAST inside a function or cast on the right
(`column > COALESCE(LAST, 0)`, `column > CAST(LAST AS INT)`). LAST anywhere else is refused (400).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest

_OPERATORS = (">", ">=")
WHERE_TO_USE = (
    "LAST is supported in the WHERE of a job's SELECT or INSERT ... SELECT, as `column > LAST`, "
    "`column >= LAST` or `column > COALESCE(LAST, <value>)`"
)
MaxQuery = Callable[[ast.Select], Awaitable[Any]]


def _children(node: Any) -> Iterator[Any]:
    if isinstance(node, ast.ASTNode):
        yield from vars(node).values()
    elif isinstance(node, (list, tuple)):
        yield from node
    elif isinstance(node, dict):
        yield from node.values()


def contains_last(node: Any) -> bool:
    """Whether `LAST` appears anywhere in the statement."""
    if isinstance(node, ast.Last):
        return True
    return any(contains_last(child) for child in _children(node))


def statement_has_last(statement: Any, sql: str | None) -> bool:
    """`contains_last`, without walking the statement when its text `sql` (if known) has no "last" in it:
    only the keyword makes a LAST node, and most statements are not jobs'."""
    return (sql is None or "last" in sql.lower()) and contains_last(statement)


@dataclass
class _Condition:
    node: ast.BinaryOperation
    column: ast.Identifier
    bare: bool  # `column > LAST`, not LAST inside a function
    key: str


def _replace_last(node: Any, value: ast.ASTNode) -> bool:
    """Replace the first LAST inside a function or cast with `value`."""
    if isinstance(node, ast.TypeCast):
        if isinstance(node.arg, ast.Last):
            node.arg = value
            return True
        return _replace_last(node.arg, value)
    if isinstance(node, ast.Function):
        for i, arg in enumerate(node.args):
            if isinstance(arg, ast.Last):
                node.args[i] = value
                return True
            if _replace_last(arg, value):
                return True
    return False


def _conditions(where: Any, prefix: str) -> list[_Condition]:
    found: list[_Condition] = []

    def visit(node: Any) -> None:
        if (
            isinstance(node, ast.BinaryOperation)
            and node.op.lower() not in ("and", "or")
            and contains_last(node.args[1])
        ):
            if node.op.lower() not in _OPERATORS or not isinstance(node.args[0], ast.Identifier):
                raise BadRequest(f"{WHERE_TO_USE}; not {node.to_string()}", title="Invalid LAST")
            key = f"{prefix}:{node.to_string()}"
            found.append(_Condition(node, node.args[0], isinstance(node.args[1], ast.Last), key))
            return
        for child in _children(node):
            visit(child)

    visit(where)
    return found


def _select_of(statement: Any) -> ast.Select | None:
    if isinstance(statement, ast.Select):
        return statement
    if isinstance(statement, ast.Insert) and isinstance(statement.from_select, ast.Select):
        return statement.from_select
    return None


def _constant(value: Any) -> ast.Constant:
    return ast.Constant(value)


def _and(left: Any, right: Any) -> Any:
    if left is None:
        return right
    if isinstance(left, ast.BinaryOperation) and left.op.lower() == "or":
        left.parentheses = True  # `(a OR b) AND bound`: the bound applies to the whole condition
    return ast.BinaryOperation(op="and", args=[left, right])


def _flag(value: Any) -> bool:
    value = value.value if isinstance(value, ast.Constant) else value
    return value is True or value == 1 or (isinstance(value, str) and value.lower() == "true")


def check_not_mirrored(statement: Any) -> None:
    """A mirrored insert (`USING mirror = true`) deletes the documents its SELECT does not return, so its SELECT
    must be the whole source: LAST, which narrows it to the rows since the previous run, is refused with it
    (here, before LAST is resolved into constants the insert could no longer tell apart)."""
    if not isinstance(statement, ast.Insert) or not contains_last(statement):
        return
    using = getattr(statement.from_select, "using", None) or {}
    if any(str(key).lower() == "mirror" and _flag(value) for key, value in using.items()):
        raise BadRequest(
            "USING mirror cannot be used with LAST: a SELECT of the rows since the last run is not the whole "
            "source, and the documents it does not return would be deleted",
            title="Invalid LAST",
        )


@dataclass
class Resolved:
    """The statement with LAST resolved, and the values to keep if the run succeeds."""

    statement: Any
    pending: dict[str, Any]


async def resolve(statement: Any, prefix: str, stored: dict[str, Any], max_of: MaxQuery) -> Resolved:
    """Resolve LAST in `statement` (changed in place), `prefix` naming its place in the job (e.g. `2` or
    `if:0`); `stored` holds the previous run's values by key; `max_of` runs a MAX query (a SELECT) and
    returns its one value."""
    if not contains_last(statement):
        return Resolved(statement, {})
    check_not_mirrored(statement)
    select = _select_of(statement)
    if (
        select is None
        or select.where is None
        or contains_last([v for k, v in vars(select).items() if k != "where"])
    ):
        raise BadRequest(WHERE_TO_USE, title="Invalid LAST")
    conditions = _conditions(select.where, prefix)
    for condition in conditions:  # 1: the previous values, or the first run's reading
        previous = stored.get(condition.key)
        if condition.bare:
            if previous is None:  # first run: the condition reads everything
                condition.node.op = "="
                condition.node.args = [_constant(1), _constant(1)]
            else:
                condition.node.args[1] = _constant(previous)
        else:
            _replace_last(
                condition.node.args[1], _constant(previous) if previous is not None else ast.NullConstant()
            )
    pending: dict[str, Any] = {}
    bounds: list[Any] = []
    for condition in conditions:  # 2: how far this run reads
        query = ast.Select(
            targets=[
                ast.Function(
                    "max", args=[copy.deepcopy(condition.column)], alias=ast.Identifier("last_value")
                )
            ],
            from_table=copy.deepcopy(select.from_table),
            where=copy.deepcopy(select.where),
        )
        largest = await max_of(query)
        if largest is None:  # nothing to read: LAST stays as it was
            if (previous := stored.get(condition.key)) is not None:
                pending[condition.key] = previous
            continue
        pending[condition.key] = largest
        bounds.append(
            ast.BinaryOperation(op="<=", args=[copy.deepcopy(condition.column), _constant(largest)])
        )
    for bound in bounds:
        select.where = _and(select.where, bound)
    return Resolved(statement, pending)
