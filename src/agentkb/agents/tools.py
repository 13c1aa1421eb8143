"""The agent's tools, with MindsDB 25.14's names and observation texts (contract §4).

Knowledge bases give `kb_list_tool`, `kb_info_tool` and `kb_query_tool` (`kb_tools.py`, through `KBSearch.query`:
the KB SELECT executor of the SQL endpoint); tables give `sql_db_list_tables`,
`sql_db_schema` and `sql_db_query` (through `sql_fence`), over registered data sources and the uploaded table
files (`files.<name>`, `files_db.py`). Each tool takes one string; `AgentTools.call` never raises for bad
input: the observation says what went wrong, so the model can try again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

from sqlalchemy import Engine

from agentkb.agents import sql_fence
from agentkb.agents.files_db import FILES, FileTables
from agentkb.agents.kb_tools import KBTools
from agentkb.agents.observations import Citation, ToolResult, ToolSpec, cut, format_result, to_csv
from agentkb.agents.ports import DataSourceEngines, KBCatalog, KBSearch, UploadedTables
from agentkb.agents.sql_fence import AllowedTable, AllowList, FencedQuery, Rows
from agentkb.errors import AgentKBError, BadRequest
from agentkb.sql.kbquery import strip_wrappers

__all__ = ["AgentTools", "Citation", "ToolResult", "ToolSpec"]

log = logging.getLogger(__name__)

SAMPLE_ROWS = 3
THREAD_GRACE_S = 15.0  # how long past the statement timeout a worker may take before the tool gives up
_MISSING = ("does not exist", "doesn't exist", "not available", "no such table", "not found")


class AgentTools:
    """The tools of one agent run, over its knowledge bases and tables (patterns expanded by `resolve`)."""

    def __init__(
        self,
        *,
        project: str,
        knowledge_bases: list[str],
        tables: list[str],
        search: KBSearch,
        data_sources: DataSourceEngines,
        kb_service: KBCatalog,
        files: UploadedTables | None = None,
        row_cap: int = 100,
        statement_timeout_s: float = 30.0,
    ) -> None:
        self.project = project
        self.data_sources = data_sources
        self.row_cap = max(1, row_cap)
        self.statement_timeout_s = statement_timeout_s
        self.kbs = KBTools(
            project=project,
            entries=knowledge_bases,
            search=search,
            kb_catalog=kb_service,
            row_cap=self.row_cap,
        )
        self.files = FileTables(files) if files is not None else None
        self._table_entries = list(tables)
        self._resolved = False
        self._allowed = AllowList()
        self._lock = asyncio.Lock()
        self._handlers: dict[str, Callable[[str], Awaitable[ToolResult]]] = {}
        if knowledge_bases:
            self._handlers |= {
                "kb_list_tool": self.kbs.list,
                "kb_info_tool": self.kbs.info,
                "kb_query_tool": self.kbs.query,
            }
        if self._table_entries:
            self._handlers |= {
                "sql_db_list_tables": self._list_tables,
                "sql_db_schema": self._schema,
                "sql_db_query": self._query,
            }

    @property
    def kb_names(self) -> list[str]:
        return list(self.kbs.names or ())

    @property
    def table_names(self) -> list[str]:
        return self._allowed.names

    async def resolve(self) -> None:
        """Expand patterns and drop knowledge bases that do not exist (once per run)."""
        async with self._lock:
            if self._resolved:
                return
            await self.kbs.resolve()
            wants_files = any(e.split(".")[0].lower() == FILES for e in self._table_entries)
            files = await self.files.names() if self.files is not None and wants_files else None
            self._allowed = await sql_fence.resolve_tables(self._table_entries, self.data_sources, files)
            self._resolved = True

    def close(self) -> None:
        """Release what the run opened (the uploaded files' database)."""
        if self.files is not None:
            self.files.close()

    def specs(self) -> list[ToolSpec]:
        resolved = self._resolved  # before `resolve`, the names are left to the listing tools
        kbs = json.dumps(self.kb_names) if resolved else "see kb_list_tool"
        tables = ", ".join(self.table_names) if resolved else "see sql_db_list_tables"
        specs = {
            "kb_list_tool": ToolSpec(
                "kb_list_tool",
                "Lists the knowledge bases you can query, as a JSON list of names.",
                "an empty string",
            ),
            "kb_info_tool": ToolSpec(
                "kb_info_tool",
                "Describes knowledge bases: their schema (embedding model, metadata and content columns) "
                "and up to 20 sample rows.",
                "a comma-separated list of knowledge base names",
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

    async def select(self, sql: str) -> tuple[FencedQuery, Rows]:
        """Run one read-only SELECT through the fence, as `sql_db_query` does, at most `row_cap` rows; raises
        what refuses it (`BadRequest`) or the database's error, where `sql_db_query` turns them into text."""
        await self.resolve()
        return await self._run(strip_wrappers(sql), self.row_cap)

    # --- tables ---

    async def _list_tables(self, _: str) -> ToolResult:
        return ToolResult(", ".join(self.table_names) or "No tables found.")

    def _sql_error(self, detail: str) -> str:
        text = f"Error: {detail}"
        if any(s in detail.lower() for s in _MISSING) and "Available tables:" not in detail:
            text += f"\nAvailable tables: {', '.join(self.table_names)}"
        return text

    async def _engine(self, datasource: str) -> Engine:
        if datasource == FILES and self.files is not None:
            return await self.files.engine([t.table for t in self._allowed.tables if t.datasource == FILES])
        engine, _ = await self.data_sources.engine_for(datasource)
        return engine

    async def _run(self, sql: str, row_cap: int) -> tuple[FencedQuery, Rows]:
        fenced = sql_fence.fence(sql, self._allowed)
        engine = await self._engine(fenced.datasource)
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
            if table is None:  # MindsDB's `_resolve_table_names`
                blocks.append(self._sql_error(f"Tables: {name} not found in the database"))
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
        engine = await self._engine(table.datasource)
        types = await asyncio.to_thread(sql_fence.table_columns, engine, table)
        rows = [[cut(v) for v in row] for row in sample.rows]
        return (
            f"Table named `{table.name}`:\n\n"
            f"Sample with first {SAMPLE_ROWS} rows from table {table.name} "
            "in CSV format (dialect is 'excel'):\n\n"
            f"{to_csv([sample.columns, *rows])}\n\n"
            "Column data types: \n" + ",\t\n".join(f"`{column}` : `{kind}`" for column, kind in types)
        )
