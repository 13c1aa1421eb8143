"""What the MCP server (`api/mcp.py`, `agentkb mcp`) needs beyond the other services: the knowledge bases of
every project, and a read-only SQL query run through the agents' SQL fence.

The query is what an agent's `sql_db_query` runs (`AgentTools.select`: `pushdown.parse_select`, then the
fence's allow-list check, then a READ ONLY transaction with a statement timeout), with every table of the
data source it names allowed, uploaded table files (`files.<name>`) included.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentkb.agents.files_db import FILES
from agentkb.agents.tools import AgentTools
from agentkb.service.catalog.data_sources import DataSourceService
from agentkb.service.catalog.files import FileService
from agentkb.service.catalog.knowledge_bases import KnowledgeBaseService
from agentkb.service.catalog.projects import ProjectService
from agentkb.service.platform import access
from agentkb.service.retrieval.kb_select import KBSelect
from agentkb.service.retrieval.search import SearchService
from agentkb.sql import pushdown
from agentkb.sql.kbquery import strip_wrappers
from agentkb.storage.knowledge_bases import KnowledgeBaseRow

MAX_ROWS = 1000
DEFAULT_ROWS = 100


@dataclass(frozen=True, slots=True)
class QueryResult:
    columns: list[str]
    rows: list[list[Any]]  # JSON values (dates, decimals and the like as text)
    truncated: bool  # the query had more rows than `limit`
    tables: list[str]  # the tables it read, `<data source>.<table>`


def _tables_named(sql: str) -> list[str]:
    """The allow-list entries a query needs: every table of the data source it names (and of each schema
    it names there). The fence still checks the query; this only widens the list to that source."""
    query = pushdown.parse_select(strip_wrappers(sql), allow=frozenset({FILES}))
    schemas = query.schemas()
    return [f"{query.datasource}.*", *(f"{query.datasource}.{schema}.*" for schema in sorted(schemas))]


class MCPService:
    def __init__(
        self,
        projects: ProjectService,
        knowledge_bases: KnowledgeBaseService,
        search: SearchService,
        kb_select: KBSelect,
        data_sources: DataSourceService,
        files: FileService,
    ) -> None:
        self.projects = projects
        self.knowledge_bases = knowledge_bases
        self.search = search
        self.kb_select = kb_select
        self.data_sources = data_sources
        self.files = files

    async def all_knowledge_bases(self, project: str | None = None) -> list[KnowledgeBaseRow]:
        """The knowledge bases of one project, or of every project."""
        if project is not None:
            return await self.knowledge_bases.list(project)
        found: list[KnowledgeBaseRow] = []
        for each in await self.projects.list():
            found += await self.knowledge_bases.list(each.name)
        return found

    async def describe(self, project: str, name: str) -> tuple[KnowledgeBaseRow, int, int]:
        """A knowledge base with its document and chunk counts (404 for the project or the KB)."""
        kb = await self.search.knowledge_base(project, name)
        documents, chunks = await self.knowledge_bases.counts(kb)
        return kb, documents, chunks

    async def database_names(self) -> list[str]:
        """The data sources a query may name (`files` holds the uploaded table files); none for a project
        key, which may not reach them."""
        if access.scoped():
            return []
        return [FILES, *(row.name for row in await self.data_sources.list())]

    async def query(self, sql: str, limit: int = DEFAULT_ROWS) -> QueryResult:
        """One read-only SELECT over one data source, through the agents' fence (400 when refused)."""
        access.require_global("querying data sources")
        tools = AgentTools(
            project=self.projects.default_project,
            knowledge_bases=[],
            tables=_tables_named(sql),
            search=self.kb_select,
            data_sources=self.data_sources,
            kb_service=self.knowledge_bases,
            files=self.files,
            row_cap=max(1, min(limit, MAX_ROWS)),
        )
        try:
            fenced, rows = await tools.select(sql)
        finally:
            tools.close()
        return QueryResult(
            columns=list(rows.columns),
            rows=json.loads(json.dumps(rows.rows, default=str)),
            truncated=rows.truncated,
            tables=[table.name for table in fenced.tables],
        )
