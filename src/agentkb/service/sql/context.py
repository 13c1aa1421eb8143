"""`SQLContext`: what every statement handler receives — the services the SQL endpoint runs over, and the
reads several statement families share (does a project or KB exist, a data source's pushdown, the
`information_schema` tables, an agent's answer)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest, NotFound
from agentkb.service.catalog.knowledge_bases import VECTOR_DATABASE
from agentkb.service.sql.agents import AgentStatements
from agentkb.service.sql.queries import QUERY_COLUMNS, SQLQueries
from agentkb.service.sql.result import Result, jsonable, table
from agentkb.sql import catalog, pushdown

if TYPE_CHECKING:
    from agentkb.service.agents.completions import CompletionService
    from agentkb.service.catalog.agents import AgentService
    from agentkb.service.catalog.data_sources import DataSourceService
    from agentkb.service.catalog.files import FileService
    from agentkb.service.catalog.kb_admin import KnowledgeBaseAdmin
    from agentkb.service.catalog.knowledge_bases import KnowledgeBaseService
    from agentkb.service.catalog.projects import ProjectService
    from agentkb.service.catalog.sql_jobs import SQLJobCatalog
    from agentkb.service.ingest.query_sources import QuerySources
    from agentkb.service.ingest.service import IngestService
    from agentkb.service.retrieval.kb_select import KBSelect
    from agentkb.service.retrieval.search import SearchService

MAX_PUSHDOWN_ROWS = 10_000


class SQLContext:
    """The services and shared reads of the SQL endpoint; built once, handed to every statement handler."""

    def __init__(
        self,
        *,
        projects: ProjectService,
        agents: AgentService,
        knowledge_bases: KnowledgeBaseService,
        kb_admin: KnowledgeBaseAdmin,
        data_sources: DataSourceService,
        files: FileService,
        search: SearchService,
        kb_select: KBSelect,
        completions: CompletionService,
        ingest: IngestService,
        sources: QuerySources,
        sql_jobs: SQLJobCatalog,
        autobatch: bool = False,
    ) -> None:
        self.projects = projects
        self.agents = agents
        self.knowledge_bases = knowledge_bases
        self.kb_admin = kb_admin
        self.data_sources = data_sources
        self.files = files
        self.search = search
        self.kb_select = kb_select  # KB SELECTs, shared with the agents' KB tools
        self.completions = completions
        self.ingest = ingest
        self.sources = sources  # an insert's SELECT: uploaded files or a data source
        self.sql_jobs = sql_jobs  # MindsDB's JOBS (records; the scheduler runs them)
        self.autobatch = autobatch  # partition inserts whose source has the KB's id column
        self.agent_sql = AgentStatements(agents=agents, completions=completions)
        self.queries = SQLQueries(ingest)

    # --- what exists ----------------------------------------------------------------------------------
    async def is_project(self, name: str) -> bool:
        try:
            await self.projects.get(name)
            return True
        except NotFound:
            return False

    async def kb_exists(self, project: str, name: str) -> bool:
        try:
            await self.knowledge_bases.get(project, name)
            return True
        except NotFound:
            return False

    async def data_source_exists(self, name: str) -> bool:
        try:
            await self.data_sources.get(name)
        except NotFound:
            return False
        return True

    # --- reads ----------------------------------------------------------------------------------------
    async def agent_answer(self, project: str, agent: str, question: str) -> str:
        reply = await self.completions.complete(project, agent, [{"question": question, "answer": None}])
        return str(reply["message"]["content"])

    async def pushdown(self, select: ast.Select) -> Result:
        """A SELECT run whole by the one data source it reads (at most MAX_PUSHDOWN_ROWS rows)."""
        query = pushdown.parse_select(select.to_string())
        engine, dialect = await self.data_sources.engine_for(query.datasource)
        rendered = query.render(dialect)

        def run() -> tuple[list[str], list[list[Any]]]:
            columns: list[str] = []
            rows: list[list[Any]] = []
            stream = pushdown.stream_rows(engine, rendered, 1000)
            try:
                for columns, batch in stream:
                    rows.extend([jsonable(row[c]) for c in columns] for row in batch)
                    if len(rows) >= MAX_PUSHDOWN_ROWS:
                        break
            finally:
                stream.close()
            return columns, rows[:MAX_PUSHDOWN_ROWS]

        columns, rows = await asyncio.to_thread(run)
        return table(columns, rows)

    async def information_schema(self, select: ast.Select, name: str, db: str) -> Result:
        if name == "databases":
            rows, columns = await self.database_rows(), catalog.DATABASE_COLUMNS
        elif name == "knowledge_bases":
            rows, columns = await self.kb_rows(None), catalog.KB_COLUMNS
        elif name == "agents":
            rows, columns = await self.agent_rows(None), catalog.AGENT_COLUMNS
        elif name == "queries":
            rows, columns = await self.queries.rows(), QUERY_COLUMNS
        elif name == "jobs":
            rows, columns = await self.job_rows(None), catalog.JOB_COLUMNS
        else:
            raise BadRequest(
                f"Unknown table information_schema.{name}; available: databases, knowledge_bases, agents, "
                "queries, jobs"
            )
        names, data = catalog.select_rows(select, columns, rows)
        return table(names, data, db=db)

    async def database_rows(self) -> catalog.Rows:
        projects = [p.name for p in await self.projects.list()]
        return catalog.database_rows(projects, await self.data_sources.list())

    async def kb_rows(self, project: str | None) -> catalog.Rows:
        projects = [project] if project else [p.name for p in await self.projects.list()]
        rows: catalog.Rows = []
        for name in projects:
            rows += [catalog.kb_row(kb) for kb in await self.knowledge_bases.list(name)]
        return rows

    async def agent_rows(self, project: str | None) -> catalog.Rows:
        projects = [project] if project else [p.name for p in await self.projects.list()]
        rows: catalog.Rows = []
        for name in projects:
            rows += [catalog.agent_row(agent, name) for agent in await self.agents.list(name)]
        return rows

    async def job_rows(self, project: str | None) -> catalog.Rows:
        """MindsDB's `jobs` rows: of one project, or of every visible one."""
        return [catalog.job_row(job) for job in await self.sql_jobs.list(project)]

    async def job_history_rows(self, project: str | None) -> catalog.Rows:
        """MindsDB's `jobs_history` rows, newest first."""
        return [catalog.run_row(run) for run in await self.sql_jobs.history(project)]

    async def vector_tables(self, database: str) -> list[str] | None:
        """`SHOW TABLES FROM agentkb_pgvector` (the STORAGE every knowledge base names): their chunk tables;
        None for another database."""
        if database.lower() != VECTOR_DATABASE:
            return None
        tables: list[str] = []
        for project in await self.projects.list():
            tables += [kb.storage_table for kb in await self.knowledge_bases.list(project.name)]
        return tables
