"""Where the rows of an insert's SELECT come from: an uploaded file (`files.<name>`, the table MindsDB's `files`
database serves, evaluated here as `SELECT ... FROM files.<name>` is) or one data source (pushed down).

`stream_query` is the ingest pipeline's `RowStream`; `stream_partitions` reads a partitioned insert's rows
(MindsDB's `batch_size` / `track_column`: ordered by the track column, after the last value stored);
`has_column` is MindsDB's autobatch probe (`SELECT <column> FROM ... LIMIT 1` answers or not).
"""

from __future__ import annotations

import copy
import datetime as dt
import decimal
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast, parse_sql

from agentkb.errors import BadRequest
from agentkb.ingest.files.tables import Tabular
from agentkb.sql import catalog
from agentkb.sql.sandbox import statement_nodes

if TYPE_CHECKING:
    from agentkb.service.catalog.data_sources import DataSourceService
    from agentkb.service.catalog.files import FileService

Batch = tuple[list[str], list[dict[str, Any]]]
FILES = "files"  # MindsDB's database of uploaded files
PARTITION_ALIAS = "_partition"


def parse_select(sql: str) -> ast.Select | None:
    """The SELECT in MindsDB's dialect, or None (then only a data source's own dialect may read it)."""
    try:
        statement = parse_sql(sql)
    except Exception:  # noqa: BLE001 - the parser raises many kinds of errors
        return None
    return statement if isinstance(statement, ast.Select) else None


def check_whole_select(sql: str) -> None:
    """400 unless `sql` returns the whole set a mirrored insert may delete by: a SELECT MindsDB's parser reads,
    with no LIMIT or OFFSET and no `LAST` (MindsDB's "rows since the last run", for jobs) anywhere in it."""
    select = parse_select(sql)
    if select is None:
        raise BadRequest(
            "USING mirror needs a plain SELECT that MindsDB's SQL parser reads (its deletes depend on it)",
            title="Invalid insert option",
        )
    for node in statement_nodes(select):
        if isinstance(node, ast.Last):
            raise BadRequest(
                "USING mirror cannot be used with LAST: a SELECT of the rows since the last run is not the "
                "whole table, and mirror would delete every other document",
                title="Invalid insert option",
            )
        if isinstance(node, ast.Select) and (node.limit is not None or node.offset is not None):
            raise BadRequest(
                "USING mirror cannot be used with LIMIT or OFFSET: the SELECT must return the whole set, "
                "or mirror would delete the documents it left out",
                title="Invalid insert option",
            )


def file_name(select: ast.Select | None) -> str | None:
    """`files.<name>` when the SELECT reads an uploaded file."""
    table = select.from_table if select is not None else None
    if isinstance(table, ast.Identifier) and len(table.parts) == 2 and str(table.parts[0]).lower() == FILES:
        return str(table.parts[1]).lower()
    return None


def column_named(columns: list[str], name: str) -> str:
    """The column called `name`, case-insensitively (MindsDB's `get_column_case_insensitive`)."""
    found = [c for c in columns if c.lower() == name.lower()]
    if len(found) == 1:
        return found[0]
    if not found:
        raise BadRequest(
            f"Column '{name}' not found. Available columns: {columns}", title="Invalid SELECT query"
        )
    raise BadRequest(
        f"Ambiguous column reference: multiple columns with name '{name}' found (case-insensitive match). "
        f"Available columns: {columns}",
        title="Invalid SELECT query",
    )


def track_value(value: Any) -> Any:
    """A track value as stored in a job's JSON context (and compared with on resume)."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, float, str)):
        return value
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    return str(value)


def _after(value: Any, last: Any) -> bool:
    if value is None:
        return False
    try:
        return bool(value > last)
    except TypeError:
        return str(value) > str(last)


def _order_key(value: Any) -> tuple[bool, Any]:
    return (value is None, value if isinstance(value, (int, float)) else str(value))


def partition_select(select: ast.Select, track_column: str, after: Any) -> ast.Select:
    """MindsDB's partition query: `SELECT * FROM (<query>) WHERE <track> > <last> ORDER BY <track>`."""
    inner = copy.deepcopy(select)
    inner.parentheses = True
    inner.alias = ast.Identifier(PARTITION_ALIAS)
    where = None
    if after is not None:
        where = ast.BinaryOperation(op=">", args=[ast.Identifier(track_column), ast.Constant(after)])
    return ast.Select(
        targets=[ast.Star()],
        from_table=inner,
        where=where,
        order_by=[ast.OrderBy(ast.Identifier(track_column))],
    )


class QuerySources:
    def __init__(self, data_sources: DataSourceService, files: FileService) -> None:
        self.data_sources = data_sources
        self.files = files

    async def file_rows(self, select: ast.Select, name: str) -> tuple[list[str], list[dict[str, Any]]]:
        parsed = await self.files.open_parsed(name)
        if not isinstance(parsed, Tabular):
            raise BadRequest(
                f"File {name} is a document, not a table: insert it with PUT /api/projects/<project>/"
                f'knowledge_bases/<kb> {{"knowledge_base": {{"files": ["{name}"]}}}} instead',
                title="Invalid SELECT query",
            )
        columns, data = catalog.select_rows(select, parsed.columns, parsed.rows)
        return columns, [dict(zip(columns, row, strict=True)) for row in data]

    async def stream_query(self, sql: str, batch_size: int = 1000) -> AsyncGenerator[Batch]:
        select = parse_select(sql)
        name = file_name(select)
        if select is None or name is None:
            async for batch in self.data_sources.stream_query(sql, batch_size):
                yield batch
            return
        columns, rows = await self.file_rows(select, name)
        if not rows:
            yield columns, []
        for start in range(0, len(rows), batch_size):
            yield columns, rows[start : start + batch_size]

    async def stream_partitions(
        self, sql: str, batch_size: int, track_column: str | None, after: Any
    ) -> AsyncIterator[Batch]:
        """The rows of `sql` in batches of `batch_size`; with a track column, ordered by it and only those
        after `after` (the last value a previous run stored)."""
        select = parse_select(sql)
        if track_column is None:
            async for batch in self.stream_query(sql, batch_size):
                yield batch
            return
        if select is None:
            raise BadRequest(
                "The query cannot be partitioned by a track column: MindsDB's SQL parser cannot read it",
                title="Invalid SELECT query",
            )
        name = file_name(select)
        if name is None:
            wrapped = partition_select(select, track_column, after).to_string()
            async for batch in self.data_sources.stream_query(wrapped, batch_size):
                yield batch
            return
        columns, rows = await self.file_rows(select, name)
        if rows:
            key = column_named(columns, track_column)
            if after is not None:
                rows = [r for r in rows if _after(track_value(r[key]), after)]
            rows.sort(key=lambda r: _order_key(r[key]))
        for start in range(0, len(rows), batch_size):
            yield columns, rows[start : start + batch_size]

    async def has_column(self, sql: str, column: str) -> bool:
        """MindsDB's autobatch probe: does `SELECT <column> FROM <the query's table> ... LIMIT 1` answer?"""
        select = parse_select(sql)
        if select is None:
            return False
        probe = copy.deepcopy(select)
        probe.targets = [ast.Identifier(column)]
        probe.limit = ast.Constant(1)
        stream = self.stream_query(probe.to_string(), 1)
        try:
            await anext(stream)
        except Exception:  # noqa: BLE001 - any failure means "not partitionable" (MindsDB: the failback plan)
            return False
        finally:
            await stream.aclose()
        return True
