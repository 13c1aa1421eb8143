"""SQLAlchemy's dialect for DuckDB data sources: duckdb-engine's, with column inspection that works on
SQLAlchemy 2.1 (duckdb-engine reads columns through PostgreSQL's `pg_collation`, which DuckDB lacks).
Registered as `agentkb_duckdb` by `duckdb_source`; imported only when a DuckDB source is used."""

from __future__ import annotations

from typing import Any

import duckdb_engine
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.engine.interfaces import ReflectedColumn
from sqlalchemy.exc import NoSuchTableError
from sqlalchemy.types import UserDefinedType

_COLUMNS = text(
    "SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns "
    "WHERE table_name = :table AND table_schema = coalesce(:schema, current_schema()) "
    "ORDER BY ordinal_position"
)


class DuckDBType(UserDefinedType[Any]):
    """A column's type as DuckDB names it (`INTEGER`, `DECIMAL(18,3)`, `STRUCT(...)`)."""

    cache_ok = True

    def __init__(self, name: str) -> None:
        self.name = name

    def get_col_spec(self, **_kw: Any) -> str:
        return self.name


class DuckDBDialect(duckdb_engine.Dialect):
    supports_statement_cache = False  # as duckdb-engine's own (said here, or SQLAlchemy warns)

    def get_columns(
        self, connection: Connection, table_name: str, schema: str | None = None, **_kw: Any
    ) -> list[ReflectedColumn]:
        rows = connection.execute(_COLUMNS, {"table": table_name, "schema": schema}).all()
        if not rows:
            raise NoSuchTableError(f"{schema}.{table_name}" if schema else table_name)
        return [
            ReflectedColumn(
                name=name, type=DuckDBType(str(kind)), nullable=nullable == "YES", default=default
            )
            for name, kind, nullable, default in rows
        ]
