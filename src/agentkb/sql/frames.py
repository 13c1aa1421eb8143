"""Sub-results as tables in an in-process DuckDB, one SQL statement over them (what MindsDB's `query_df` does).

Each column is typed from its values (BOOLEAN, BIGINT, DOUBLE, DATE, TIMESTAMP, JSON for objects and lists,
VARCHAR otherwise, and VARCHAR for a mix); JSON columns come back as objects. Blocking: run it in a thread.

The statement is user SQL: it runs only after the sandbox's checks (one SELECT over the loaded tables, no
denied function, no function in FROM), on a DuckDB that can reach no file, network or extension
(`sandbox.duckdb_connect`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentkb.errors import BadRequest
from agentkb.sql import sandbox

if TYPE_CHECKING:
    import duckdb

INT64 = (-(2**63), 2**63 - 1)


@dataclass
class Frame:
    columns: list[str]
    rows: list[list[Any]]


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "BIGINT" if INT64[0] <= value <= INT64[1] else "VARCHAR"
    if isinstance(value, (float, decimal.Decimal)):
        return "DOUBLE"
    if isinstance(value, dt.datetime):
        return "TIMESTAMP" if value.tzinfo is None else "TIMESTAMPTZ"
    if isinstance(value, dt.date):
        return "DATE"
    if isinstance(value, (dict, list, tuple)):
        return "JSON"
    return "VARCHAR"


def _column_type(values: list[Any]) -> str:
    kinds = {_kind(v) for v in values if v is not None}
    if not kinds:
        return "VARCHAR"
    if len(kinds) == 1:
        return kinds.pop()
    if kinds == {"BIGINT", "DOUBLE"}:
        return "DOUBLE"
    if "JSON" in kinds:
        return "JSON"
    return "VARCHAR"


def _text(value: Any, kind: str) -> str | None:
    if value is None:
        return None
    if kind == "JSON":
        return json.dumps(value, default=str)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return str(value)


def _unique(columns: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out: list[str] = []
    for name in columns:
        key = name.lower()
        if key in seen:
            seen[key] += 1
            name = f"{name}_{seen[key]}"
        else:
            seen[key] = 0
        out.append(name)
    return out


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def load(
    con: duckdb.DuckDBPyConnection, name: str, frame: Frame, where: tuple[str, str] | None = None
) -> None:
    """`frame` as the table `name`; `where` = (alias, DuckDB condition over that alias) keeps the rows
    passing the condition."""
    import numpy as np

    columns = _unique(frame.columns)
    raw: dict[str, Any] = {}
    casts: list[str] = []
    for i, column in enumerate(columns):
        values = [row[i] for row in frame.rows]
        kind = _column_type(values)
        arr = np.empty(len(values), dtype=object)
        arr[:] = [_text(v, kind) for v in values]
        raw[f"c{i}"] = arr
        casts.append(f"CAST(c{i} AS {kind}) AS {_quote(column)}")
    if not columns:
        con.execute(f"CREATE TABLE {_quote(name)} AS SELECT 1 AS _empty WHERE false")
        return
    con.register(f"_raw_{name}", raw)
    alias, condition = where if where else (name, "")
    source = f"(SELECT {', '.join(casts)} FROM {_quote('_raw_' + name)})"
    filtered = f"SELECT {_quote(alias)}.* FROM {source} AS {_quote(alias)}"
    con.execute(f"CREATE TABLE {_quote(name)} AS {filtered}{' WHERE ' + condition if condition else ''}")
    con.unregister(f"_raw_{name}")


def to_duckdb(mindsdb_sql: str, tables: Collection[str]) -> str:
    """MindsDB's (MySQL-flavoured) SQL text as DuckDB's, checked by the sandbox as a statement over `tables`
    (so a refused query is refused before its tables are fetched)."""
    import sqlglot  # imported by the first query that needs it, not at start-up (a large import)
    from sqlglot.errors import SqlglotError

    try:
        sql = str(sqlglot.transpile(mindsdb_sql, read="mysql", write="duckdb")[0])
    except SqlglotError as exc:
        raise BadRequest(f"The query cannot be planned: {str(exc).splitlines()[0]}") from None
    sandbox.check_duckdb(sql, tables)
    return sql


def _value(value: Any, json_column: bool) -> Any:
    if json_column and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def query(
    tables: Mapping[str, Frame], sql: str, wheres: Mapping[str, tuple[str, str]] | None = None
) -> Frame:
    """Run the DuckDB `sql` over `tables` (each filtered by its entry in `wheres`)."""
    import duckdb  # imported by the first query, as sandbox.duckdb_connect does (a large import)

    sandbox.check_duckdb(sql, tables)
    con = sandbox.duckdb_connect()
    try:
        for name, frame in tables.items():
            load(con, name, frame, (wheres or {}).get(name))
        result = con.execute(sql)
        description = result.description or []
        columns = [d[0] for d in description]
        json_columns = [str(d[1]) == "JSON" for d in description]
        rows = [[_value(v, j) for v, j in zip(row, json_columns, strict=True)] for row in result.fetchall()]
        return Frame(columns, rows)
    except duckdb.Error as exc:
        raise BadRequest(_message(exc), title="Query error") from None
    finally:
        con.close()


def _message(exc: duckdb.Error) -> str:
    text = " ".join(str(exc).split())
    prefixes = (
        "Binder Error: ",
        "Parser Error: ",
        "Conversion Error: ",
        "Catalog Error: ",
        "Permission Error: ",
    )
    for prefix in prefixes:
        text = text.replace(prefix, "")
    return text[:1000]
