"""`POST /api/sql/query/utils/parametrize_constants`: a statement's constants turned into `:name`
parameters, as MindsDB 26.1 answers it (the query, the parameters with their values and Python type names,
and the tables it names per database).

A parameter is named after what the constant is compared with (`price = 10` → `:price`), the alias of the
select target or expression it sits in (`1 AS year` → `:year`), the column it is inserted into or set to
(INSERT … VALUES, UPDATE … SET), else `param`; a name used again gets a number (`:price2`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mindsdb_sql_parser import ast, parse_sql

from agentkb.errors import BadRequest

# (node, its ancestors nearest first, is it a table reference, is it a select target) -> replacement or None
Visit = Callable[[Any, list[Any], bool, bool], Any]


@dataclass
class Parametrized:
    query: str
    parameters: list[dict[str, Any]]
    databases: dict[str, list[str]]


def parametrize(sql: str) -> Parametrized:
    try:
        statement = parse_sql(sql)
    except Exception as exc:  # the parser raises many kinds of errors
        raise BadRequest(f"Invalid SQL: {exc}", title="Invalid SQL") from exc
    return _Parametrizer().run(statement)


@dataclass
class _Parametrizer:
    parameters: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    databases: dict[str, list[str]] = field(default_factory=dict)
    default_name: str = "param"

    def run(self, statement: ast.ASTNode) -> Parametrized:
        if isinstance(statement, ast.Update):
            for column, value in dict(statement.update_columns).items():
                if isinstance(value, ast.Constant):
                    statement.update_columns[column] = self.parameter(column, value.value)
                else:
                    self.default_name = column
                    walk(value, self.visit)
        elif isinstance(statement, ast.Insert) and statement.values:
            names = [c.name if hasattr(c, "name") else str(c.parts[-1]) for c in statement.columns or []]
            table = str(statement.table.parts[-1]) if statement.table is not None else None
            statement.values = [
                [
                    self.parameter(names[i] if i < len(names) else table, v.value)
                    if isinstance(v, ast.Constant)
                    else v
                    for i, v in enumerate(row)
                ]
                for row in statement.values
            ]
        self.default_name = "param"
        walk(statement, self.visit)
        return Parametrized(str(statement), self.parameters, self.databases)

    def parameter(self, name: str | None, value: Any) -> ast.Parameter:
        name = name or self.default_name
        number = self.counts.get(name, 1)
        self.counts[name] = number + 1
        if number > 1:
            name = f"{name}{number}"
        self.parameters.append({"name": name, "value": value, "type": type(value).__name__})
        return ast.Parameter(name)

    def visit(self, node: Any, stack: list[Any], is_table: bool, is_target: bool) -> Any:
        if is_table and isinstance(node, ast.Identifier) and len(node.parts) > 1:
            tables = self.databases.setdefault(str(node.parts[0]), [])
            table = ".".join(str(p) for p in node.parts[1:])
            if table not in tables:
                tables.append(table)
        if not isinstance(node, ast.Constant):
            return None
        if is_target and node.alias is not None:
            return self.parameter(str(node.alias.parts[-1]), node.value)
        return self.parameter(_name_from(stack), node.value)


def _name_from(stack: list[Any]) -> str | None:
    """The column a constant is compared with, or the alias of the nearest aliased ancestor."""
    for item in stack:
        if isinstance(item, ast.BinaryOperation | ast.BetweenOperation) and item.op.lower() not in (
            "and",
            "or",
        ):
            for arg in item.args:
                if isinstance(arg, ast.Identifier):
                    return str(arg.parts[-1])
        if getattr(item, "alias", None) is not None:
            return str(item.alias.parts[-1])
    return None


def walk(
    node: Any, visit: Visit, stack: list[Any] | None = None, *, table: bool = False, target: bool = False
) -> Any:
    """Visit `node`, then (unless it was replaced) its children in MindsDB's order; a visit's non-None
    answer replaces the node. Returns the replacement, or None."""
    stack = stack or []
    replaced = visit(node, stack, table, target)
    if replaced is not None:
        return replaced
    inner = [node, *stack]

    def one(child: Any, *, is_table: bool = False, is_target: bool = False) -> Any:
        if child is None:
            return None
        out = walk(child, visit, inner, table=is_table, target=is_target)
        return child if out is None else out

    def many(children: list[Any] | None, **kinds: bool) -> list[Any] | None:
        return None if children is None else [one(c, **kinds) for c in children]

    if isinstance(node, ast.Select):
        node.from_table = one(node.from_table, is_table=True)
        node.targets = many(node.targets, is_target=True)
        if node.cte is not None:
            for cte in node.cte:
                cte.query = one(cte.query)
        node.where = one(node.where)
        node.group_by = many(node.group_by)
        node.having = one(node.having)
        node.order_by = many(node.order_by)
    elif isinstance(node, ast.Union | ast.Intersect | ast.Except):
        node.left, node.right = one(node.left), one(node.right)
    elif isinstance(node, ast.Join):
        node.right = one(node.right, is_table=True)
        node.left = one(node.left, is_table=True)
        node.condition = one(node.condition)
    elif isinstance(node, ast.Function | ast.BinaryOperation | ast.UnaryOperation | ast.BetweenOperation):
        node.args = many(node.args)
        if isinstance(node, ast.Function):
            node.from_arg = one(node.from_arg)
    elif isinstance(node, ast.Exists | ast.NotExists):
        node.query = one(node.query)
    elif isinstance(node, ast.WindowFunction):
        node.function = one(node.function)
        node.partition = many(node.partition)
        node.order_by = many(node.order_by)
    elif isinstance(node, ast.TypeCast):
        node.arg = one(node.arg)
    elif isinstance(node, ast.Tuple):
        node.items = many(node.items)
    elif isinstance(node, ast.Insert):
        node.table = one(node.table, is_table=True)
        if node.values is not None:
            node.values = [many(row) for row in node.values]
        node.from_select = one(node.from_select)
    elif isinstance(node, ast.Update):
        node.table = one(node.table, is_table=True)
        node.where = one(node.where)
        if node.update_columns is not None:
            for column, value in list(node.update_columns.items()):
                node.update_columns[column] = one(value)
        node.from_select = one(node.from_select)
    elif isinstance(node, ast.Delete):
        node.table = one(node.table, is_table=True)
        node.where = one(node.where)
    elif isinstance(node, ast.OrderBy):
        node.field = one(node.field)
    elif isinstance(node, ast.Case):
        node.rules = [[one(condition), one(result)] for condition, result in node.rules]
        node.default = one(node.default)
        node.arg = one(node.arg)
    return None
