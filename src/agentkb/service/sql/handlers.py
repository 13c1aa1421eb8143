"""The SQL endpoint's table of statements: `{statement type: handler}`, filled with `register()`.

A handler is `async (context, statement, db, params) -> Result`: it receives the `SQLContext` (the services
and the reads statements share), the parsed statement, the current database and the bound parameters. The
dispatcher (`service.SQLService`) looks a statement's exact type up here; a type with no handler is an
unsupported statement."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mindsdb_sql_parser import ast

from agentkb.service.sql.context import SQLContext
from agentkb.service.sql.result import Result

Params = Mapping[str, Any] | None
Handler = Callable[[SQLContext, Any, str, Params], Awaitable[Result]]


class HandlerTable:
    def __init__(self) -> None:
        self._handlers: dict[type[ast.ASTNode], Handler] = {}

    def register(self, statement: type[ast.ASTNode], handler: Handler) -> None:
        """`handler` answers statements of exactly this type; registering a type twice is a mistake."""
        if statement in self._handlers:
            raise ValueError(f"{statement.__name__} has a handler already")
        self._handlers[statement] = handler

    def get(self, statement: ast.ASTNode) -> Handler | None:
        return self._handlers.get(type(statement))

    def __contains__(self, statement: type[ast.ASTNode]) -> bool:
        return statement in self._handlers
