"""The knowledge-base tools: `kb_list_tool`, `kb_info_tool` and `kb_query_tool`, with MindsDB 25.14's inputs and
texts (`mindsdb_kb_tools.py`, `SQLAgent.check_knowledge_base_permission`).

An agent's `data.knowledge_bases` entries are `<project>.<kb>`, `<project>.*` or name patterns
(`<project>.kb_show*`: globs as fnmatch reads them, case-insensitive, matched by RE2); `resolve` expands them
to the knowledge bases that exist.
A knowledge base outside them is "not found", with the entries as the agent was given them. Names may come
back-quoted as one identifier (`` `mindsdb.kb1` ``): if that name is not allowed, its dotted parts are tried,
as MindsDB does for LLMs that quote badly.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mindsdb_sql_parser import ast

from agentkb.agents.observations import Citation, ToolResult, format_result, is_number
from agentkb.agents.ports import KBCatalog, KBSearch
from agentkb.errors import AgentKBError, BadRequest, NotFound
from agentkb.kb.search import COLUMNS, Hit
from agentkb.patterns import glob_match
from agentkb.sql import catalog
from agentkb.sql.kbquery import parse_kb_statement

KB_ERROR = (
    "Error executing knowledge base query: {}. "
    "Please check that the knowledge base exists and your query syntax is correct."
)
NO_KB_NAMES = (
    "No valid knowledge base names provided. Please provide knowledge base names as a list, comma-separated "
    "string, or enclosed in backticks between $START$ and $STOP$."
)
INFO_SAMPLE_ROWS = 20  # kb_info_tool's `SELECT * FROM <kb> LIMIT 20`
GLOB = re.compile(r"[*?\[]")


def is_pattern(name: str) -> bool:
    return GLOB.search(name) is not None


def llm_str_strip(text: str) -> str:
    """MindsDB's `llm_str_strip`: drop ``` fences, new lines at the ends and an unpaired quote."""
    length = -1
    while length != len(text):
        length = len(text)
        text = text.removeprefix("```").removesuffix("```").strip("\n")
        for quote in ('"', "'", "`"):
            if text.count(quote) == 1:
                text = text.strip(quote)
    return text


def kb_info_names(tool_input: str) -> list[str]:
    """MindsDB's `_extract_kb_names`: a JSON list, names in backticks between $START$ and $STOP$, a
    comma-separated list, or one name."""
    try:
        parsed = json.loads(tool_input)
        if isinstance(parsed, list):
            return [str(n) for n in parsed]
    except (json.JSONDecodeError, TypeError):
        pass
    match = re.search(r"\$START\$(.*?)\$STOP\$", tool_input, re.DOTALL)
    if match is None:
        if "," in tool_input:
            return [n.strip() for n in tool_input.split(",")]
        return [llm_str_strip(tool_input)] if tool_input.strip() else []
    return [llm_str_strip(n) for n in re.findall(r"`([^`]+)`", match.group(1).strip())]


def split_quoted(identifier: ast.Identifier) -> ast.Identifier | None:
    """`` `a.b` `` (one quoted part holding dots) as `a`.`b`; None when no part holds a dot."""
    parts: list[str] = []
    for part, quoted in zip(identifier.parts, identifier.is_quoted, strict=False):
        text = str(part)
        parts.extend(ast.Identifier(text).parts if quoted and "." in text else [text])
    return ast.Identifier(parts=parts) if len(parts) != len(identifier.parts) else None


def _hit_value(hit: Hit, column: str) -> Any:
    return getattr(hit, column) if column in COLUMNS else hit.metadata.get(column)


def _sort_key(value: Any) -> tuple[int, float, str]:
    """Numbers, then text, then NULL (so NULLs come first when descending, as in PostgreSQL)."""
    if value is None:
        return (2, 0.0, "")
    return (0, float(value), "") if is_number(value) else (1, 0.0, str(value))


def _order(rows: list[list[Any]], columns: list[str], order_by: tuple[tuple[str, bool], ...]) -> None:
    for column, descending in reversed(order_by):  # stable sorts, last key first
        if column in columns:
            i = columns.index(column)
            rows.sort(key=lambda row: _sort_key(row[i]), reverse=descending)


def _detail(exc: Exception) -> str:
    return exc.detail if isinstance(exc, AgentKBError) else str(exc)


class KBTools:
    """The knowledge-base tools of one agent run."""

    def __init__(
        self, *, project: str, entries: list[str], search: KBSearch, kb_catalog: KBCatalog, row_cap: int
    ) -> None:
        self.project = project
        self.entries = list(entries)
        self.search = search
        self.kb_catalog = kb_catalog
        self.row_cap = row_cap
        self.names: list[str] | None = None  # "<project>.<kb>", once resolved

    async def resolve(self) -> None:
        names: list[str] = []
        for entry in self.entries:
            project, _, kb = entry.rpartition(".")
            try:
                if is_pattern(kb):
                    rows = [
                        row
                        for row in await self.kb_catalog.list(project or self.project)
                        if glob_match(row.name, kb)
                    ]
                else:
                    rows = [await self.kb_catalog.get(project or self.project, kb)]
            except NotFound:
                continue
            names.extend(f"{row.project_name}.{row.name}" for row in rows)
        self.names = list(dict.fromkeys(names))

    def allowed(self, identifier: ast.Identifier) -> tuple[str, str]:
        """(project, kb) of an allowed knowledge base, spelt as stored; else MindsDB's "not found"."""
        for candidate in (identifier, split_quoted(identifier)):
            parts = [str(p) for p in candidate.parts] if candidate is not None else []
            if len(parts) in (1, 2):
                wanted = ".".join([self.project, *parts] if len(parts) == 1 else parts).casefold()
                for name in self.names or ():
                    if name.casefold() == wanted:
                        project, _, kb = name.partition(".")
                        return project, kb
        raise BadRequest(
            f"Knowledge base {'.'.join(str(p) for p in identifier.parts)} not found. "
            f"Available knowledge bases: {', '.join(self.entries)}"
        )

    async def list(self, _: str) -> ToolResult:
        names = self.names or []
        return ToolResult(json.dumps(names) if names else "No knowledge bases found.")

    async def info(self, tool_input: str) -> ToolResult:
        """Per knowledge base: its DESCRIBE row (information_schema.knowledge_bases) and 20 sample rows."""
        names = kb_info_names(tool_input)
        if not names:
            return ToolResult(NO_KB_NAMES)
        blocks: list[str] = []
        citations: list[Citation] = []
        for written in names:
            try:
                project, kb = self.allowed(ast.Identifier(written))
                row = catalog.kb_row(await self.kb_catalog.get(project, kb))
                schema = format_result(list(row), [list(row.values())])
                sample_select = ast.Select(
                    targets=[ast.Star()],
                    from_table=ast.Identifier(parts=[project, kb]),
                    limit=ast.Constant(INFO_SAMPLE_ROWS),
                )
                _, hits = await self.search.query(sample_select, self.project)
            except Exception as exc:  # noqa: BLE001 - reported per knowledge base, as MindsDB does
                blocks.append(f"Error getting information for knowledge base `{written}`: {_detail(exc)}")
                continue
            sample = format_result(list(COLUMNS), [[_hit_value(h, c) for c in COLUMNS] for h in hits])
            blocks.append(
                f"## Knowledge Base: `{written}`\n\n### Schema Information:\n```\n{schema}\n```\n\n"
                f"### Sample Data:\n```\n{sample}\n```\n"
            )
            citations.append(Citation("kb", f"{project}.{kb}"))
        return ToolResult("\n\n".join(blocks), tuple(citations))

    async def query(self, tool_input: str) -> ToolResult:
        try:
            statement = parse_kb_statement(tool_input)
            if isinstance(statement, ast.Select) and isinstance(statement.from_table, ast.Identifier):
                project, kb = self.allowed(statement.from_table)
                statement.from_table = ast.Identifier(parts=[project, kb], alias=statement.from_table.alias)
            # a listing without LIMIT reads up to the row cap, not the whole KB
            query, hits = await self.search.query(statement, self.project, listing_limit=self.row_cap)
        except Exception as exc:  # noqa: BLE001 - parse, permission, search and database errors alike
            return ToolResult(KB_ERROR.format(_detail(exc).rstrip(".")))
        columns = list(query.columns or COLUMNS)
        rows = [[_hit_value(hit, c) for c in columns] for hit in hits]
        _order(rows, columns, query.order_by)
        name = f"{query.project}.{query.kb}"
        return ToolResult(
            format_result(columns, rows),
            tuple(Citation("kb", name, h.chunk_id, h.metadata.get("_source")) for h in hits),
            tuple({"page_content": h.chunk_content, "metadata": h.metadata} for h in hits),
        )
