"""What a statement answers on the SQL endpoint (`Result`), and values made JSON-ready for it.

A leaf: every statement family builds its answer from here, and imports nothing of the SQL services."""

from __future__ import annotations

import datetime as dt
import decimal
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from mindsdb_sql_parser import ast


@dataclass
class Result:
    kind: str  # "table" or "ok"
    column_names: list[str] = field(default_factory=list)
    data: list[list[Any]] = field(default_factory=list)
    affected_rows: int | None = None
    db: str = "mindsdb"


def table(columns: list[str], data: list[list[Any]], db: str = "mindsdb") -> Result:
    return Result("table", columns, data, db=db)


def ok(affected_rows: int | None = None, db: str = "mindsdb") -> Result:
    return Result("ok", affected_rows=affected_rows, db=db)


def jsonable(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def statement_kind(statement: ast.ASTNode) -> str:
    """A statement's kind in SQL words: CreateKnowledgeBase → CREATE KNOWLEDGE BASE."""
    return re.sub(r"(?<!^)(?=[A-Z])", " ", type(statement).__name__).upper()
