"""`/api/sql/query`'s `params`: bound into a parsed statement before it is executed, as MindsDB does.

- `:name` (`ast.Parameter`) anywhere in the statement — a WHERE, the select list, `IN :list`, a KB query,
  an `information_schema` SELECT — becomes a constant: a list is a tuple (`IN :names`), `null` is NULL.
  A parameter left unbound is MindsDB's error "Parameter is not set: name" (`?` included).
- `@name` (`ast.Variable`) inside a statement's option values (`CREATE DATABASE … PARAMETERS = {…}`,
  `CREATE KNOWLEDGE_BASE … USING …`, `CREATE AGENT … USING …`) becomes the parameter's value; an unknown one
  is MindsDB's "Variable name is not defined". System variables (`@@name`) are left alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest


def needs_binding(sql: str, params: Mapping[str, Any] | None) -> bool:
    """Cheap pre-check: a statement without `:`, `?` or `@` has nothing to bind (the common case)."""
    return bool(params) or any(c in sql for c in ":?@")


def bind(statement: ast.ASTNode, params: Mapping[str, Any] | None) -> ast.ASTNode:
    """Bind `params` into `statement` in place (and return it); 400 for an unbound name."""
    _Binder(params or {}).node(statement)
    return statement


EXPRESSION_DICTS = frozenset({"update_columns"})  # `UPDATE … SET col = <expression>`


class _Binder:
    def __init__(self, params: Mapping[str, Any]) -> None:
        self.params = params
        self.seen: set[int] = set()

    def _lookup(self, name: str) -> tuple[bool, Any]:
        if name in self.params:
            return True, self.params[name]
        lowered = name.lower()
        for key, value in self.params.items():
            if key.lower() == lowered:
                return True, value
        return False, None

    def _parameter(self, node: ast.Parameter) -> ast.ASTNode:
        name = str(node.value)
        found, value = (False, None) if name == "?" else self._lookup(name)
        if not found:
            raise BadRequest(f"Parameter is not set: {name}")
        if value is None:
            bound: ast.ASTNode = ast.NullConstant()
        elif isinstance(value, list | tuple):
            bound = ast.Tuple([ast.Constant(item) for item in value])
        else:
            bound = ast.Constant(value)
        bound.alias = node.alias
        return bound

    def _variable_value(self, node: ast.Variable) -> Any:
        found, value = self._lookup(str(node.value))
        if not found:
            raise BadRequest(f"Variable {str(node.value).lower()} is not defined")
        return value

    def node(self, node: ast.ASTNode) -> ast.ASTNode:
        """The node itself, its children bound; or its replacement if it is a parameter."""
        if isinstance(node, ast.Parameter):
            return self._parameter(node)
        if id(node) in self.seen:
            return node
        self.seen.add(id(node))
        for attr, value in vars(node).items():
            if attr in EXPRESSION_DICTS and isinstance(value, dict):  # values are expressions, not options
                for key, item in value.items():
                    value[key] = self.child(item, data=False)
                continue
            bound = self.child(value, data=False)
            if bound is not value:
                setattr(node, attr, bound)
        return node

    def child(self, value: Any, *, data: bool) -> Any:
        """`data`: inside an option value (a dict of `USING` or `PARAMETERS`), where values are Python's."""
        if isinstance(value, ast.Variable):
            return self._variable_value(value) if data and not value.is_system_var else value
        if data and isinstance(value, ast.Parameter):
            bound = self._parameter(value)
            return bound.value if isinstance(bound, ast.Constant) else [c.value for c in bound.items]
        if isinstance(value, ast.ASTNode):
            return self.node(value)
        if isinstance(value, list):
            value[:] = [self.child(item, data=data) for item in value]
            return value
        if isinstance(value, tuple):
            items = tuple(self.child(item, data=data) for item in value)
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        if isinstance(value, dict):
            for key, item in list(value.items()):
                value[key] = self.child(item, data=True)
            return value
        return value
