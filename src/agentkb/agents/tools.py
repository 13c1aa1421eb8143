"""The agent's tools, with MindsDB 25.14's names and observation texts (contract §4).

Knowledge bases give `kb_list_tool` and `kb_query_tool` (through `KBSearch.query`: the search service, the executor of the
HTTP search endpoint); tables give `sql_db_list_tables`, `sql_db_schema` and `sql_db_query` (through
`sql_fence`). Each tool takes one string; `AgentTools.call` never raises for bad input: the observation says
what went wrong, so the model can try again.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import logging
import statistics
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from numbers import Number
from typing import Any, Literal

from agentkb.agents import sql_fence
from agentkb.agents.ports import DataSourceEngines, KBCatalog, KBSearch
from agentkb.agents.sql_fence import AllowedTable, AllowList, FencedQuery, Rows
from agentkb.errors import AgentKBError, BadRequest, NotFound
from agentkb.kb.search import COLUMNS, Hit
from agentkb.sql.kbquery import KBQuery, parse_kb_select, strip_wrappers

log = logging.getLogger(__name__)

SHOWN_ROWS = 30  # MindsDB describes larger results and shows their first 30 rows
SAMPLE_ROWS = 3
SAMPLE_CHARS = 100
THREAD_GRACE_S = 15.0  # how long past the statement timeout a worker may take before the tool gives up
KB_ERROR = (
    "Error executing knowledge base query: {}. "
    "Please check that the knowledge base exists and your query syntax is correct."
)


@dataclass(frozen=True)
class Citation:
    kind: Literal["kb", "table"]
    name: str  # kb: "<project>.<kb>"; table: "<ds>.<table>"
    chunk_id: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class ToolResult:
    observation: str
    citations: tuple[Citation, ...] = ()
    context: tuple[dict[str, Any], ...] = ()  # {"page_content", "metadata"} per KB hit; row dicts for tables


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_description: str  # the one string argument, named "tool_input"


# --- observation formatting ----------------------------------------------------------------------------


def to_csv(rows: Sequence[Sequence[Any]]) -> str:
    """MindsDB's `list_to_csv_str`: csv.writer(dialect="excel"), CRLF line ends, `str()` of each cell."""
    out = io.StringIO()
    csv.writer(out, dialect="excel").writerows([[str(v) for v in row] for row in rows])
    return out.getvalue()


def _is_number(value: Any) -> bool:
    return isinstance(value, Number) and not isinstance(value, bool)


def describe(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A small stand-in for pandas' `describe(include="all")`: count, unique, top, freq, mean, min, max."""
    labels = ("count", "unique", "top", "freq", "mean", "min", "max")
    table: list[list[str]] = [["", *columns]] + [[label] for label in labels]
    for i in range(len(columns)):
        values = [row[i] for row in rows if row[i] is not None]
        counts = Counter(str(v) for v in values)
        top, freq = counts.most_common(1)[0] if counts else ("NaN", "NaN")
        numeric = bool(values) and all(_is_number(v) for v in values)
        stats: list[Any] = [len(values), "NaN", "NaN", "NaN", "NaN", "NaN", "NaN"]
        if numeric:
            stats[4:] = [round(statistics.fmean(float(v) for v in values), 6), min(values), max(values)]
        elif values:
            stats[1:4] = [len(counts), top if len(top) <= 40 else top[:37] + "...", freq]
        for line, value in zip(table[1:], stats, strict=True):
            line.append(str(value))
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=False))
        )
        for line in table
    )


def format_result(columns: Sequence[str], rows: Sequence[Sequence[Any]], truncated: bool = False) -> str:
    """MindsDB's observation for a query result; a truncated one says which rows it holds."""
    text = f"Output columns: {', '.join(repr(c) for c in columns)}\n"
    if len(rows) > SHOWN_ROWS:
        count = f"more than {len(rows)} rows (first {len(rows)} rows)" if truncated else f"{len(rows)} rows"
        text += f"\nResult has {count}. Description of data:\n{describe(columns, rows)}\n\n"
        text += f"First {SHOWN_ROWS} rows:\n"
    else:
        text += "Result in CSV format (dialect is 'excel'):\n"
    text += to_csv([list(columns), *rows[:SHOWN_ROWS]])
    if truncated and len(rows) <= SHOWN_ROWS:
        text += f"(first {len(rows)} rows)\n"
    return text


def _cut(value: Any) -> str:
    text = str(value)
    return text[:SAMPLE_CHARS] + "..." if len(text) > SAMPLE_CHARS else text


def _hit_value(hit: Hit, column: str) -> Any:
    return getattr(hit, column) if column in COLUMNS else hit.metadata.get(column)


def _sort_key(value: Any) -> tuple[int, float, str]:
    """Numbers, then text, then NULL (so NULLs come first when descending, as in PostgreSQL)."""
    if value is None:
        return (2, 0.0, "")
    return (0, float(value), "") if _is_number(value) else (1, 0.0, str(value))


def _order(rows: list[list[Any]], columns: Sequence[str], order_by: Sequence[tuple[str, bool]]) -> None:
    for column, descending in reversed(order_by):  # stable sorts, last key first
        if column in columns:
            i = columns.index(column)
            rows.sort(key=lambda row: _sort_key(row[i]), reverse=descending)


# --- the tools -----------------------------------------------------------------------------------------


class AgentTools:
    """The tools of one agent run, over its knowledge bases and tables (wildcards expanded by `resolve`)."""

    def __init__(
        self,
        *,
        project: str,
        knowledge_bases: list[str],
        tables: list[str],
        search: KBSearch,
        data_sources: DataSourceEngines,
        kb_service: KBCatalog,
        row_cap: int = 100,
        statement_timeout_s: float = 30.0,
    ) -> None:
        self.project = project
        self.search = search
        self.data_sources = data_sources
        self.kb_service = kb_service
        self.row_cap = max(1, row_cap)
        self.statement_timeout_s = statement_timeout_s
        self._kb_entries = list(knowledge_bases)
        self._table_entries = list(tables)
        self._kbs: list[str] | None = None
        self._allowed = AllowList()
        self._lock = asyncio.Lock()
        self._handlers: dict[str, Callable[[str], Awaitable[ToolResult]]] = {}
        if self._kb_entries:
            self._handlers |= {"kb_list_tool": self._kb_list, "kb_query_tool": self._kb_query}
        if self._table_entries:
            self._handlers |= {
                "sql_db_list_tables": self._list_tables,
                "sql_db_schema": self._schema,
                "sql_db_query": self._query,
            }

    @property
    def kb_names(self) -> list[str]:
        return list(self._kbs or ())

    @property
    def table_names(self) -> list[str]:
        return self._allowed.names

    async def resolve(self) -> None:
        """Expand wildcards and drop knowledge bases that do not exist (once per run)."""
        async with self._lock:
            if self._kbs is not None:
                return
            names: list[str] = []
            for entry in self._kb_entries:
                project, _, kb = entry.rpartition(".")
                try:
                    if kb == "*":
                        rows = await self.kb_service.list(project or self.project)
                    else:
                        rows = [await self.kb_service.get(project or self.project, kb)]
                except NotFound:
                    continue
                names.extend(f"{row.project_name}.{row.name}" for row in rows)
            self._allowed = await sql_fence.resolve_tables(self._table_entries, self.data_sources)
            self._kbs = list(dict.fromkeys(names))

    def specs(self) -> list[ToolSpec]:
        resolved = self._kbs is not None  # before `resolve`, the names are left to the listing tools
        kbs = json.dumps(self.kb_names) if resolved else "see kb_list_tool"
        tables = ", ".join(self.table_names) if resolved else "see sql_db_list_tables"
        specs = {
            "kb_list_tool": ToolSpec(
                "kb_list_tool",
                "Lists the knowledge bases you can query, as a JSON list of names.",
                "an empty string",
            ),
            "kb_query_tool": ToolSpec(
                "kb_query_tool",
                "Searches a knowledge base with SQL. `content = '...'` runs a semantic search; "
                "other conditions filter on metadata keys; `relevance >= 0.5` drops weak matches. "
                "Columns: id, chunk_id, chunk_content, metadata, distance, relevance. "
                f"Knowledge bases: {kbs}.",
                "one SQL query, e.g. SELECT chunk_content, metadata FROM <project>.<knowledge_base> "
                "WHERE content = 'what to look for' LIMIT 5",
            ),
            "sql_db_list_tables": ToolSpec(
                "sql_db_list_tables",
                "Output is a comma-separated list of the tables you can query.",
                "an empty string",
            ),
            "sql_db_schema": ToolSpec(
                "sql_db_schema",
                "Output is the column types and sample rows of the given tables. "
                "Be sure that the tables exist by calling sql_db_list_tables first!",
                "a comma-separated list of tables, e.g. datasource.table1, datasource.table2",
            ),
            "sql_db_query": ToolSpec(
                "sql_db_query",
                "Runs one read-only SELECT and returns its result. Name tables as <datasource>.<table>; "
                f"only these tables can be read: {tables}. At most {self.row_cap} rows are returned. "
                "If an error is returned, rewrite the query and try again; use sql_db_schema to check "
                "column names.",
                "one SQL SELECT query",
            ),
        }
        return [specs[name] for name in self._handlers]

    async def call(self, name: str, tool_input: str) -> ToolResult:
        handler = self._handlers.get(name)
        if handler is None:
            return ToolResult(
                f"Unknown tool {name!r}. Available tools: {', '.join(self._handlers) or 'none'}"
            )
        text = tool_input if isinstance(tool_input, str) else json.dumps(tool_input, default=str)
        try:
            await self.resolve()
            return await handler(text)
        except Exception as exc:  # the model sees the error and may retry
            log.exception("tool %s failed", name)
            return ToolResult(f"Error executing query: {exc}")

    # --- knowledge bases ---

    async def _kb_list(self, _: str) -> ToolResult:
        return ToolResult(json.dumps(self.kb_names) if self.kb_names else "No knowledge bases found.")

    def _allowed_kb(self, query: KBQuery) -> str:
        wanted = f"{query.project or self.project}.{query.kb}"
        for name in self.kb_names:
            if name.casefold() == wanted.casefold():
                return name
        available = json.dumps(self.kb_names)
        raise BadRequest(f"Knowledge base {wanted} is not available to this agent. Available: {available}")

    async def _kb_query(self, tool_input: str) -> ToolResult:
        try:
            query = parse_kb_select(tool_input, self.project)
            project, _, kb = self._allowed_kb(query).partition(".")
            query = replace(query, project=project, kb=kb)
            if query.content is None and query.limit is None:
                query = replace(query, limit=self.row_cap)  # a bare listing would read the whole KB
            _, hits = await self.search.query(query, self.project)
        except Exception as exc:  # noqa: BLE001 - parse, permission, search and database errors alike
            detail = exc.detail if isinstance(exc, AgentKBError) else str(exc)
            return ToolResult(KB_ERROR.format(detail.rstrip(".")))
        columns = list(query.columns or COLUMNS)
        rows = [[_hit_value(hit, c) for c in columns] for hit in hits]
        _order(rows, columns, query.order_by)
        name = f"{project}.{kb}"
        return ToolResult(
            format_result(columns, rows),
            tuple(Citation("kb", name, h.chunk_id, h.metadata.get("_source")) for h in hits),
            tuple({"page_content": h.chunk_content, "metadata": h.metadata} for h in hits),
        )

    # --- tables ---

    async def _list_tables(self, _: str) -> ToolResult:
        return ToolResult(", ".join(self.table_names) or "No tables found.")

    def _sql_error(self, detail: str) -> str:
        text = f"Error: {detail}"
        lowered = detail.lower()
        if any(s in lowered for s in ("does not exist", "doesn't exist", "not available", "no such table")):
            text += f"\nAvailable tables: {', '.join(self.table_names)}"
        return text

    async def _run(self, sql: str, row_cap: int) -> tuple[FencedQuery, Rows]:
        fenced = sql_fence.fence(sql, self._allowed)
        engine, _ = await self.data_sources.engine_for(fenced.datasource)
        work = asyncio.to_thread(sql_fence.fetch, engine, fenced.sql, row_cap, self.statement_timeout_s)
        try:
            rows = await asyncio.wait_for(work, self.statement_timeout_s + THREAD_GRACE_S)
        except TimeoutError:
            raise BadRequest(
                f"The query did not finish within {self.statement_timeout_s:g} seconds"
            ) from None
        return fenced, rows

    async def _query(self, tool_input: str) -> ToolResult:
        try:
            fenced, result = await self._run(strip_wrappers(tool_input), self.row_cap)
        except Exception as exc:  # noqa: BLE001 - refusals and database errors alike
            return ToolResult(self._sql_error(exc.detail if isinstance(exc, AgentKBError) else str(exc)))
        return ToolResult(
            format_result(result.columns, result.rows, result.truncated),
            tuple(Citation("table", t.name) for t in fenced.tables),
            tuple(dict(zip(result.columns, row, strict=True)) for row in result.rows),
        )

    async def _schema(self, tool_input: str) -> ToolResult:
        blocks: list[str] = []
        cited: list[Citation] = []
        for name in (n.strip() for n in strip_wrappers(tool_input).split(",")):
            if not name:
                continue
            table = self._allowed.lookup(name)
            if table is None:
                blocks.append(self._sql_error(f"Table {name} is not available to this agent"))
                continue
            try:
                blocks.append(await self._table_info(table))
                cited.append(Citation("table", table.name))
            except Exception as exc:  # noqa: BLE001 - reported per table
                blocks.append(self._sql_error(exc.detail if isinstance(exc, AgentKBError) else str(exc)))
        if not blocks:
            return ToolResult(self._sql_error("give a comma-separated list of tables"))
        return ToolResult("\n\n".join(blocks), tuple(dict.fromkeys(cited)))

    async def _table_info(self, table: AllowedTable) -> str:
        _, sample = await self._run(f"SELECT * FROM {table.reference()} LIMIT {SAMPLE_ROWS}", SAMPLE_ROWS)
        engine, _ = await self.data_sources.engine_for(table.datasource)
        types = await asyncio.to_thread(sql_fence.table_columns, engine, table)
        rows = [[_cut(v) for v in row] for row in sample.rows]
        return (
            f"Table named `{table.name}`:\n\n"
            f"Sample with first {SAMPLE_ROWS} rows from table {table.name} "
            "in CSV format (dialect is 'excel'):\n\n"
            f"{to_csv([sample.columns, *rows])}\n\n"
            "Column data types: \n" + ",\t\n".join(f"`{column}` : `{kind}`" for column, kind in types)
        )
