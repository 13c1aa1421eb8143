"""Parse MindsDB's knowledge-base SELECT dialect into a typed `KBQuery` (pure; no I/O).

    SELECT * | col [AS name], ... FROM [<project>.]<kb>
    [WHERE cond AND cond ...] [ORDER BY col [ASC|DESC], ...] [LIMIT n [OFFSET m]]

Conditions (AND only here; `kb_algebra` runs OR, NOT and several content conditions as several searches):
  * `content = '...'` / `content LIKE '...'` (also `chunk_content`): the semantic search text.
    LIKE is treated as `=`, as MindsDB does; as MindsDB, spaces and `%` around a LIKE pattern are dropped.
  * `relevance >= x` / `relevance > x`, 0 <= x <= 1: the relevance threshold.
  * `reranking = <bool>`, `hybrid_search = <bool>`, `hybrid_search_alpha = <0..1>`: MindsDB flags.
  * anything else is a `Filter` on a metadata key (`k`, `metadata.k`, `metadata->>'k'`) or on
    `id` / `chunk_id`. `k = NULL` / `k != NULL` read as IS NULL / IS NOT NULL, `k IS TRUE` as `k = TRUE`,
    `k BETWEEN a AND b` as `k >= a AND k <= b`.

`limit` is kept exactly as given (None when absent). MindsDB defaults a content search to 10 rows and
caps it at 100; applying that default and cap is the executor's job, not the parser's.
Named placeholders (`:name`, as `/api/sql/query` sends with `params`) are bound from `params`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest
from agentkb.kb.filters import FilterOp
from agentkb.sql.kbsearch import (
    CONTENT_COLUMNS,
    FLAG_COLUMNS,
    KB_COLUMNS,
    Condition,
    KBQuery,
    assemble,
)
from agentkb.sql.statements import StatementCache

__all__ = [
    "CONTENT_COLUMNS",
    "FLAG_COLUMNS",
    "KB_COLUMNS",
    "Condition",
    "ConditionParser",
    "KBQuery",
    "assemble",
    "condition_parser",
    "parse_kb_select",
    "parse_kb_select_ast",
    "strip_wrappers",
]

_RESERVED = frozenset(KB_COLUMNS) | CONTENT_COLUMNS | FLAG_COLUMNS

_OPS: dict[str, FilterOp] = {
    "=": "=",
    "!=": "!=",
    "<>": "!=",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
    "in": "in",
    "not in": "not in",
    "like": "like",
    "not like": "not like",
}
_MIRROR = {"=": "=", "!=": "!=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_HINT = "use id, chunk_id, chunk_content, metadata, distance, relevance or a metadata key"
_NUMBER_RE = re.compile(r"^-?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$", re.IGNORECASE)


def strip_wrappers(text: str) -> str:
    """Take the text between `$START$` and `$STOP$` and drop ``` fences, as MindsDB's agent tools do."""
    if "$START$" in text:
        text = text.split("$START$", 1)[1]
    if "$STOP$" in text:
        text = text.split("$STOP$", 1)[0]
    text = text.strip()
    if text.startswith("```"):
        text = text[3:]
        first, sep, rest = text.partition("\n")
        if sep and re.fullmatch(r"[A-Za-z][\w+-]*", first.strip()) and first.strip().lower() != "select":
            text = rest
    return text.removesuffix("```").strip()


def parse_kb_select(
    sql: str, default_project: str | None = None, *, params: Mapping[str, Any] | None = None
) -> KBQuery:
    """Parse one knowledge-base SELECT; raise `BadRequest` naming what is wrong or unsupported."""
    return parse_kb_select_ast(parse_kb_statement(sql), default_project, params=params)


# an agent's KB queries differ in their string constants: parsed once per shape
_STATEMENTS = StatementCache()


def parse_kb_statement(sql: str) -> ast.ASTNode:
    """The statement of `sql` (its `$START$`/`$STOP$` wrappers and code fences dropped), not yet checked as
    a KB SELECT; `BadRequest` when it is empty or does not parse."""
    text = strip_wrappers(sql)
    if not text:
        raise BadRequest("Empty query: expected a SELECT over a knowledge base")
    try:
        return _STATEMENTS.parse(text)
    except Exception as e:  # the parser raises ParsingException, and TypeError on some bad input
        raise BadRequest(f"Invalid SQL: {e}") from e


def parse_kb_select_ast(
    select: ast.Select,
    default_project: str | None,
    *,
    params: Mapping[str, Any] | None = None,
    where: bool = True,
) -> KBQuery:
    """Like `parse_kb_select`, for a statement the caller has already parsed. `where=False` checks and reads
    all but the WHERE (the KB, columns, LIMIT, OFFSET, ORDER BY), for an executor that runs the WHERE through
    `kb_algebra`."""
    if not isinstance(select, ast.Select):
        kind = type(select).__name__.upper()
        raise BadRequest(f"Only SELECT queries are supported on a knowledge base, got {kind}")
    for attr, what in (
        ("cte", "WITH"),
        ("distinct", "DISTINCT"),
        ("group_by", "GROUP BY"),
        ("having", "HAVING"),
        ("mode", "FOR UPDATE / locking clauses"),
        ("using", "USING"),
    ):
        if getattr(select, attr, None):
            raise BadRequest(f"{what} is not supported in a knowledge base query")
    project, kb, quals = _table(select.from_table, default_project)
    return ConditionParser(quals, params or {}).build(select, project, kb, where=where)


def condition_parser(
    select: ast.Select, default_project: str | None, params: Mapping[str, Any] | None = None
) -> tuple[str | None, str, ConditionParser]:
    """(project, kb, the parser of its conditions) for a SELECT over one knowledge base."""
    project, kb, quals = _table(select.from_table, default_project)
    return project, kb, ConditionParser(quals, params or {})


def _table(node: Any, default_project: str | None) -> tuple[str | None, str, tuple[tuple[str, ...], ...]]:
    if node is None:
        raise BadRequest("The query has no FROM clause: expected FROM <project>.<knowledge_base>")
    if isinstance(node, ast.Join):
        raise BadRequest("Joins are not supported in a knowledge base query: select from one knowledge base")
    if isinstance(node, (ast.Select, ast.Union, ast.Intersect, ast.Except)):
        raise BadRequest("Subqueries are not supported in a knowledge base query")
    if not isinstance(node, ast.Identifier):
        raise BadRequest(f"Unsupported FROM clause: {node}")
    parts = [str(x) for x in node.parts]
    if len(parts) == 1:
        project, kb = default_project, parts[0]
    elif len(parts) == 2:
        project, kb = parts[0], parts[1]
    else:
        name = ".".join(parts)
        raise BadRequest(f"Invalid knowledge base name {name}: expected <project>.<knowledge_base>")
    quals: list[tuple[str, ...]] = [(kb.lower(),)]
    if project is not None:
        quals.append((project.lower(), kb.lower()))
    if node.alias is not None:
        quals.append(tuple(str(x).lower() for x in node.alias.parts))
    return project, kb, tuple(quals)


class ConditionParser:
    """Resolves one KB SELECT's columns and comparisons (names qualified by the KB, its project or alias)."""

    def __init__(self, quals: tuple[tuple[str, ...], ...], params: Mapping[str, Any]) -> None:
        self.quals = sorted(quals, key=len, reverse=True)
        self.params = params

    def build(self, s: ast.Select, project: str | None, kb: str, *, where: bool = True) -> KBQuery:
        columns, names = self._targets(s.targets)
        return assemble(
            project,
            kb,
            self._conditions(s.where) if where else (),
            columns=columns,
            column_names=names,
            limit=_count("LIMIT", s.limit),
            offset=_count("OFFSET", s.offset),
            order_by=self._order(s.order_by),
        )

    def _targets(self, targets: list[Any]) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
        """(columns, their output names): (None, None) for SELECT *; names differ where aliased."""
        if any(self._is_star(t) for t in targets):
            if len(targets) > 1:
                raise BadRequest("SELECT * cannot be combined with other columns")
            return None, None
        cols: list[str] = []
        names: list[str] = []
        for t in targets:
            if not _is_column(t):
                raise BadRequest(
                    f"Unsupported column {t}: columns only (no functions or expressions); {_HINT}"
                )
            name = self._column(t)
            if name in FLAG_COLUMNS or name == "content":
                raise BadRequest(f"{name} is not a column: {_HINT}")
            if name in KB_COLUMNS and self._is_metadata_access(t):
                name = f"metadata.{name}"  # the metadata key `id`, not the KB's column `id`
            cols.append(name)
            alias = getattr(t, "alias", None)
            names.append(str(alias.parts[-1]) if alias is not None else name)
        return tuple(cols), (tuple(names) if names != cols else None)

    def _is_metadata_access(self, t: Any) -> bool:
        if isinstance(t, ast.BinaryOperation):
            return True
        parts = [str(x).lower() for x in t.parts]
        for q in self.quals:
            if len(parts) > len(q) and tuple(parts[: len(q)]) == q:
                parts = parts[len(q) :]
                break
        return len(parts) == 2 and parts[0] == "metadata"

    def _is_star(self, t: Any) -> bool:
        if isinstance(t, ast.Identifier) and isinstance(t.parts[-1], ast.Star):  # kb.* / alias.*
            return tuple(str(x).lower() for x in t.parts[:-1]) in self.quals
        return isinstance(t, ast.Star)

    def _order(self, order_by: list[Any] | None) -> tuple[tuple[str, bool], ...]:
        out: list[tuple[str, bool]] = []
        for o in order_by or ():
            if not _is_column(o.field):
                raise BadRequest(f"ORDER BY supports columns only, got {o.field}")
            if str(o.nulls).lower() != "default":
                raise BadRequest("NULLS FIRST / NULLS LAST is not supported in ORDER BY")
            out.append((self._column(o.field), str(o.direction).upper() == "DESC"))
        return tuple(out)

    def _conditions(self, node: Any) -> Iterator[tuple[str, FilterOp, Any]]:
        if node is None:
            return
        if isinstance(node, ast.BinaryOperation) and node.op.lower() == "and":
            for arg in node.args:
                yield from self._conditions(arg)
        elif isinstance(node, ast.BinaryOperation) and node.op.lower() == "or":
            raise BadRequest("OR is not supported in this version: combine conditions with AND")
        elif isinstance(node, ast.UnaryOperation) and node.op.lower() == "not":
            raise BadRequest("NOT is not supported in this version: use !=, NOT IN, NOT LIKE or IS NOT")
        elif isinstance(node, ast.BetweenOperation):
            yield from self.between(node)
        elif isinstance(node, ast.BinaryOperation) and len(node.args) == 2:
            yield self.comparison(node)
        else:
            raise BadRequest(f"Unsupported condition: {node}")

    def between(self, node: ast.BetweenOperation) -> tuple[Condition, Condition]:
        key = self._column(node.args[0])
        return (key, ">=", self._value(node.args[1])), (key, "<=", self._value(node.args[2]))

    def comparison(self, node: ast.BinaryOperation) -> tuple[str, FilterOp, Any]:
        op = node.op.lower()
        left, right = node.args
        if any(isinstance(a, (ast.Select, ast.Union)) for a in (left, right)):
            raise BadRequest("Subqueries are not supported in a knowledge base query")
        if not _is_column(left) and _is_column(right) and op in _MIRROR:
            left, right, op = right, left, _MIRROR[op]
        key = self._column(left)
        if op in ("in", "not in"):
            if not isinstance(right, ast.Tuple):
                raise BadRequest(f"{op.upper()} needs a list of values, e.g. {key} IN ('a', 'b')")
            return key, _OPS[op], tuple(self._value(v) for v in right.items)
        value = self._value(right)
        if op in ("is", "is not"):
            if value is None:
                return key, "is null" if op == "is" else "is not null", None
            if isinstance(value, bool):
                return key, "=" if op == "is" else "!=", value
            raise BadRequest(f"IS needs NULL, TRUE or FALSE, got {right}")
        if op not in _OPS:
            raise BadRequest(f"Operator {node.op} is not supported in a knowledge base query")
        if value is None and op in ("=", "!=", "<>"):
            return key, "is null" if op == "=" else "is not null", None
        if isinstance(value, tuple):
            raise BadRequest(f"{node.op.upper()} needs a single value, got a list")
        if op in ("like", "not like") and not isinstance(value, str):
            raise BadRequest(f"{op.upper()} needs a string pattern, got {right}")
        return key, _OPS[op], value

    def _column(self, node: Any) -> str:
        """Resolve a column reference to a KB column name (lower-cased) or a metadata key (as written)."""
        if isinstance(node, ast.BinaryOperation) and node.op in ("->>", "->"):
            base, key = node.args
            named = isinstance(key, ast.Constant) and isinstance(key.value, str)
            if named and self._column(base) == "metadata":
                return str(key.value)
            raise BadRequest(f"Unsupported JSON access {node}: use metadata->>'key'")
        if not isinstance(node, ast.Identifier) or _numeric(node) is not None:
            raise BadRequest(f"Expected a column name, got {node}")
        parts = [str(x) for x in node.parts]
        for q in self.quals:
            if len(parts) > len(q) and tuple(x.lower() for x in parts[: len(q)]) == q:
                parts = parts[len(q) :]
                break
        if len(parts) == 1:
            return parts[0].lower() if parts[0].lower() in _RESERVED else parts[0]
        if len(parts) == 2 and parts[0].lower() == "metadata":
            return parts[1]
        raise BadRequest(f"Unknown column {node}: {_HINT}")

    def _value(self, node: Any) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Parameter):
            name = str(node.value)
            if name not in self.params:
                raise BadRequest(
                    f"Unbound query parameter :{name}"
                    if name != "?"
                    else "Positional ? parameters are not supported: use :name"
                )
            value = self.params[name]
            return tuple(value) if isinstance(value, list) else value
        if isinstance(node, ast.Identifier) and (num := _numeric(node)) is not None:
            return num
        if isinstance(node, (ast.Select, ast.Union)):
            raise BadRequest("Subqueries are not supported in a knowledge base query")
        raise BadRequest(f"Expected a literal value (string, number, boolean or NULL), got {node}")


def _numeric(node: ast.Identifier) -> int | float | None:
    text = str(node.parts[0])  # parser quirk: exponent literals such as 1e3 come back as an Identifier
    if len(node.parts) != 1 or not _NUMBER_RE.match(text):
        return None
    return int(text) if text.lstrip("-").isdigit() else float(text)


def _is_column(node: Any) -> bool:
    if isinstance(node, ast.Identifier):
        return _numeric(node) is None
    return isinstance(node, ast.BinaryOperation) and node.op in ("->>", "->")


def _count(clause: str, node: Any) -> int | None:
    if node is None:
        return None
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest(f"{clause} must be a non-negative integer, got {node}")
    return value
