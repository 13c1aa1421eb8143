"""The `files` data source for an agent's tools: its uploaded table files (CSV, XLSX, JSON, ...) as tables.

MindsDB reads `files.<name>` in process; here the files an agent may read are loaded, once per run and only
when a tool first reads one, into a private in-memory SQLite database (SQLAlchemy over the standard
library's sqlite3). The agent's SQL then goes through the same fence, read-only execution and inspection
as any data source's, rendered for SQLite. Column types are inferred from the values (INTEGER, REAL, else
TEXT), so `id = '1001'` still finds an integer id; objects and lists are stored as JSON text. Once loaded,
the database is sandboxed (`sandbox.guard_sqlite`): it can only be read, with no extension, attached
database or file function.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import sqlalchemy
from sqlalchemy import Engine
from sqlalchemy.pool import StaticPool

from agentkb.agents.ports import UploadedTables
from agentkb.ingest.files.tables import Tabular
from agentkb.sql import sandbox

FILES = "files"  # MindsDB's data source of uploaded files
DIALECT = "sqlite"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql_type(values: list[Any]) -> str:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "INTEGER"
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return "REAL"
    return "TEXT"


def _cell(value: Any) -> Any:
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    if value is None or isinstance(value, str | int | float):
        return value
    return str(value)


def load(tables: dict[str, Tabular]) -> Engine:
    """An in-memory SQLite database holding `tables`, read-only once loaded. Blocking: run it in a thread."""
    engine = sqlalchemy.create_engine(
        "sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False}
    )
    with engine.begin() as conn:
        for name, table in tables.items():
            rows = [[_cell(row.get(c)) for c in table.columns] for row in table.rows]
            columns = [f"{_quote(c)} {_sql_type([r[i] for r in rows])}" for i, c in enumerate(table.columns)]
            conn.exec_driver_sql(f"CREATE TABLE {_quote(name)} ({', '.join(columns)})")
            if rows and table.columns:
                marks = ", ".join("?" for _ in table.columns)
                conn.exec_driver_sql(f"INSERT INTO {_quote(name)} VALUES ({marks})", [tuple(r) for r in rows])
    raw = engine.raw_connection()  # the one connection (StaticPool) every later query uses
    try:
        assert isinstance(raw.driver_connection, sqlite3.Connection)
        sandbox.guard_sqlite(raw.driver_connection)
    finally:
        raw.close()
    return engine


class FileTables:
    """The uploaded table files of one run: their names, and (on first use) a database holding the allowed ones."""

    def __init__(self, files: UploadedTables) -> None:
        self.files = files
        self._engine: Engine | None = None
        self._lock = asyncio.Lock()

    async def names(self) -> list[str]:
        return sorted(f.name for f in await self.files.list() if f.columns is not None)

    async def engine(self, names: Sequence[str]) -> Engine:
        async with self._lock:
            if self._engine is None:
                tables: dict[str, Tabular] = {}
                uploaded = set(await self.names())
                for name in dict.fromkeys(names):
                    if name in uploaded:
                        parsed = await self.files.open_parsed(name)
                        if isinstance(parsed, Tabular):
                            tables[name] = parsed
                self._engine = await asyncio.to_thread(load, tables)
            return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
