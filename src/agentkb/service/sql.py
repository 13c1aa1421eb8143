"""MindsDB's SQL over agentkb: parse with mindsdb-sql-parser, dispatch each statement to the services.

Supported: SELECT over `information_schema.{databases,knowledge_bases,agents}`, over a knowledge base
(the KB executor), over an agent (`WHERE question = ...`), and pushed down to one data source; SHOW
DATABASES / KNOWLEDGE_BASES / AGENTS; CREATE/DROP KNOWLEDGE_BASE, AGENT, DATABASE, PROJECT; ALTER AGENT;
INSERT INTO <kb> SELECT ... [USING ...] / VALUES ..., DROP TABLE files.<name>, USE <database>,
information_schema.queries and SELECT query_cancel(<id>) (in `sql_insert.py`, `sql_queries.py`); DELETE FROM
<kb> WHERE .... Anything else is an error naming the statement. The agent statements live in
`sql_agents.py`, the KB DDL in `sql_ddl.py`; a KB SELECT runs in `sql_kb`; joins, subqueries, UNION and
grouped or ordered KB/file SELECTs are planned in `sql_select`. Every statement first passes the SQL
sandbox's name fence (`sql.sandbox`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import re
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy
from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest, NotFound
from agentkb.ingest.files.tables import Tabular
from agentkb.service import access, sql_ddl
from agentkb.service.knowledge_bases import KnowledgeBaseInput
from agentkb.service.search import KnowledgeBaseGone
from agentkb.service.sql_agents import AgentStatements
from agentkb.service.sql_insert import SQLInsert
from agentkb.service.sql_kb import KBSelect
from agentkb.service.sql_queries import QUERY_COLUMNS
from agentkb.service.sql_select import SelectRunner, needs_planner
from agentkb.sql import catalog, pushdown, sandbox
from agentkb.sql import params as sql_params
from agentkb.sql.kbquery import parse_kb_select_ast, strip_wrappers
from agentkb.sql.names import one_part, two_part
from agentkb.sql.parametrize import parametrize
from agentkb.sql.statements import StatementCache

if TYPE_CHECKING:
    from agentkb.service.agents import AgentService
    from agentkb.service.completions import CompletionService
    from agentkb.service.data_sources import DataSourceService
    from agentkb.service.evaluate import EvaluateService
    from agentkb.service.files import FileService
    from agentkb.service.ingest import IngestService
    from agentkb.service.kb_admin import KnowledgeBaseAdmin
    from agentkb.service.knowledge_bases import KnowledgeBaseService
    from agentkb.service.projects import ProjectService
    from agentkb.service.search import SearchService

MAX_PUSHDOWN_ROWS = 10_000
# what a read-only API key may run (`SELECT query_cancel(…)` is refused by its own service)
READ_STATEMENTS = (ast.Select, ast.Union, ast.Intersect, ast.Except, ast.Show, ast.Describe, ast.Use)
FILES = "files"  # MindsDB's data source of uploaded files


@dataclass
class Result:
    kind: str  # "table" or "ok"
    column_names: list[str] = field(default_factory=list)
    data: list[list[Any]] = field(default_factory=list)
    affected_rows: int | None = None
    db: str = "mindsdb"


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


class SQLService:
    """`/api/sql/query`: one statement of MindsDB's SQL, executed over the other services."""

    evaluations: EvaluateService | None = None  # EVALUATE KNOWLEDGE_BASE (set by build_services)

    def __init__(
        self,
        *,
        projects: ProjectService,
        agents: AgentService,
        knowledge_bases: KnowledgeBaseService,
        data_sources: DataSourceService,
        ingest: IngestService,
        search: SearchService,
        files: FileService,
        completions: CompletionService,
        kb_admin: KnowledgeBaseAdmin,
        inserts: SQLInsert,
    ) -> None:
        self.projects = projects
        self.agents = agents
        self.knowledge_bases = knowledge_bases
        self.data_sources = data_sources
        self.ingest = ingest
        self.search = search
        self.files = files
        self.completions = completions
        self.kb_admin = kb_admin
        self.agent_sql = AgentStatements(agents=agents, completions=completions)
        self.kb_select = KBSelect(search)
        self.statements = StatementCache()
        self.runner = SelectRunner(self)
        self.inserts = inserts

    async def agent_answer(self, project: str, agent: str, question: str) -> str:
        reply = await self.completions.complete(project, agent, [{"question": question, "answer": None}])
        return str(reply["message"]["content"])

    def parametrize(self, query: str) -> dict[str, Any]:
        """MindsDB's `parametrize_constants` helper: the constants as `:name` parameters; nothing runs."""
        return asdict(parametrize(query))

    async def execute(self, sql: str, db: str, params: Mapping[str, Any] | None = None) -> Result:
        try:
            statement = self.statements.parse(strip_wrappers(sql))
        except Exception as exc:  # the parser raises many kinds of errors
            raise BadRequest(f"Invalid SQL: {exc}") from exc
        if sql_params.needs_binding(sql, params):
            sql_params.bind(statement, params)  # `:name` and `@name`, as MindsDB binds them
        sandbox.check_statement(statement)  # no file, network, settings or table function, on any path
        handler = getattr(self, f"_{type(statement).__name__.lower()}", None)
        if handler is None:
            raise BadRequest(f"Unsupported statement: {type(statement).__name__} ({sql.strip()[:80]})")
        if not isinstance(statement, READ_STATEMENTS):
            access.require_write(f"SQL {statement_kind(statement)}")
        result: Result = await handler(statement, db, params)
        if result.db == "mindsdb" and db != "mindsdb" and not isinstance(statement, ast.Use):
            result.db = db
        return result

    # --- SELECT -----------------------------------------------------------------------------------
    async def _select(self, select: ast.Select, db: str, params: Mapping[str, Any] | None) -> Result:
        if select.from_table is None and (answer := await self.inserts.queries.service_function(select)):
            return answer
        if select.from_table is None:
            raise BadRequest("SELECT without FROM is not supported")
        if select.cte or not isinstance(select.from_table, ast.Identifier):
            return await self.runner.result(select, db, params)  # joins, subqueries, native queries
        parts = [str(p) for p in select.from_table.parts]
        if parts[0].lower() == "information_schema" and len(parts) == 2:
            return await self._information_schema(select, parts[1].lower(), db)
        namespace, name = two_part(select.from_table, db) if len(parts) <= 2 else (parts[0], parts[1])
        known = self.search.cached(namespace.lower(), name)  # a KB searched before: its search validates it
        if known is not None or await self._is_project(namespace):
            project = namespace.lower()
            try:  # one lookup: a knowledge base, else an agent
                kb = known or await self.search.knowledge_base(project, name)
            except NotFound:
                columns, rows = await self.agent_sql.select(select, project, name)
                return Result("table", columns, rows)
            if needs_planner(select):  # GROUP BY, aggregates, ORDER BY, expressions: DuckDB
                return await self.runner.result(select, db, params)
            try:
                columns, rows = await self.kb_select.select(kb, select, db, params)
            except KnowledgeBaseGone:  # dropped by another process since this one cached it
                if known is None:
                    raise
                return await self._select(select, db, params)  # now uncached: looked up by name
            return Result("table", columns, rows, db=db)
        if namespace.lower() == FILES:
            if needs_planner(select):
                if len(parts) == 1:  # `USE files`: a bare name is a file; the planner wants it qualified
                    select.from_table = ast.Identifier(parts=[FILES, parts[0]], alias=select.from_table.alias)
                return await self.runner.result(select, db, params)
            return await self._file_select(select, name)
        if len(parts) == 1:  # a bare table in a data source's context: qualify it for the pushdown
            select.from_table = ast.Identifier(parts=[namespace, parts[0]], alias=select.from_table.alias)
        return await self._pushdown(select, namespace)

    async def _union(self, union: ast.Union, db: str, params: Mapping[str, Any] | None) -> Result:
        return await self.runner.result(union, db, params)

    _intersect = _except = _union

    async def _file_select(self, select: ast.Select, name: str) -> Result:
        """`SELECT ... FROM files.<name>`: the rows of an uploaded table file (CSV, XLSX, JSON)."""
        parsed = await self.files.open_parsed(name.lower())
        if not isinstance(parsed, Tabular):
            raise BadRequest(
                f"File {name} is a document, not a table; insert it into a knowledge base instead"
            )
        columns, data = catalog.select_rows(select, parsed.columns, parsed.rows)
        return Result("table", columns, [[jsonable(v) for v in row] for row in data])

    async def _is_project(self, name: str) -> bool:
        try:
            await self.projects.get(name)
            return True
        except NotFound:
            return False

    async def _kb_exists(self, project: str, name: str) -> bool:
        try:
            await self.knowledge_bases.get(project, name)
            return True
        except NotFound:
            return False

    async def _pushdown(self, select: ast.Select, source: str) -> Result:
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
        return Result("table", columns, rows)

    async def _information_schema(self, select: ast.Select, table: str, db: str) -> Result:
        if table == "databases":
            rows, columns = await self._database_rows(), catalog.DATABASE_COLUMNS
        elif table == "knowledge_bases":
            rows, columns = await self._kb_rows(None), catalog.KB_COLUMNS
        elif table == "agents":
            rows, columns = await self._agent_rows(None), catalog.AGENT_COLUMNS
        elif table == "queries":
            rows, columns = await self.inserts.queries.rows(), QUERY_COLUMNS
        else:
            raise BadRequest(
                f"Unknown table information_schema.{table}; available: databases, knowledge_bases, agents, "
                "queries"
            )
        names, data = catalog.select_rows(select, columns, rows)
        return Result("table", names, data, db=db)

    async def _database_rows(self) -> catalog.Rows:
        projects = [p.name for p in await self.projects.list()]
        return catalog.database_rows(projects, await self.data_sources.list())

    async def _kb_rows(self, project: str | None) -> catalog.Rows:
        projects = [project] if project else [p.name for p in await self.projects.list()]
        rows: catalog.Rows = []
        for name in projects:
            rows += [catalog.kb_row(kb) for kb in await self.knowledge_bases.list(name)]
        return rows

    async def _agent_rows(self, project: str | None) -> catalog.Rows:
        projects = [project] if project else [p.name for p in await self.projects.list()]
        rows: catalog.Rows = []
        for name in projects:
            rows += [catalog.agent_row(agent, name) for agent in await self.agents.list(name)]
        return rows

    async def _show(self, show: ast.Show, db: str, params: Any) -> Result:
        category = show.category.upper().replace(" ", "_")
        if category in ("DATABASES", "SCHEMAS"):
            # As MindsDB: information_schema.databases' NAME as `Database`; FULL adds TYPE and ENGINE (the
            # JavaScript SDK's getAllDatabases reads them). WHERE may name any of those columns.
            rows = [{"Database": r["NAME"], **r} for r in await self._database_rows()]
            columns = ["Database", "TYPE", "ENGINE"] if "FULL" in (show.modes or []) else ["Database"]
        elif category == "KNOWLEDGE_BASES":
            rows, columns = await self._kb_rows(db), catalog.KB_COLUMNS
        elif category == "AGENTS":
            rows, columns = await self._agent_rows(db), catalog.AGENT_COLUMNS
        elif category in ("TABLES", "FULL_TABLES"):
            return await self._show_tables(show, db)
        elif category == "PROJECTS":
            rows, columns = [{"NAME": p.name} for p in await self.projects.list()], ["NAME"]
        else:
            raise BadRequest(f"Unsupported statement: SHOW {show.category}")
        if show.like is not None:
            rows = [r for r in rows if catalog.like(next(iter(r.values())), show.like)]
        rows = [r for r in rows if catalog.matches(show.where, r)]
        return Result("table", columns, [[r[c] for c in columns] for r in rows], db=db)

    async def _show_tables(self, show: ast.Show, db: str) -> Result:
        source = str(show.from_table.parts[-1]) if show.from_table is not None else db
        if source.lower() == FILES:
            names = [f.name for f in await self.files.list()]
        elif (vector_tables := await sql_ddl.vector_tables(self, source)) is not None:
            names = vector_tables
        elif await self._is_project(source):
            project = source.lower()
            names = [kb.name for kb in await self.knowledge_bases.list(project)]
            names += [a.name for a in await self.agents.list(project)]
        else:
            engine, _ = await self.data_sources.engine_for(source)
            names = await asyncio.to_thread(lambda: sorted(sqlalchemy.inspect(engine).get_table_names()))
        if show.like is not None:
            names = [n for n in names if catalog.like(n, show.like)]
        return Result("table", [f"Tables_in_{source}"], [[n] for n in names], db=db)

    async def _evaluateknowledgebase(
        self, statement: ast.EvaluateKnowledgeBase, db: str, params: Any
    ) -> Result:
        from agentkb.service.sql_evaluate import evaluate_statement

        return await evaluate_statement(self, statement, db)

    async def _use(self, use: ast.Use, db: str, params: Any) -> Result:
        return await self.inserts.use(use)

    async def _droptables(self, drop: ast.DropTables, db: str, params: Any) -> Result:
        return await self.inserts.drop_tables(drop, db)

    # --- DDL ----------------------------------------------------------------------------------------
    async def _createknowledgebase(self, create: ast.CreateKnowledgeBase, db: str, params: Any) -> Result:
        project, name = two_part(create.name, db)
        options = dict(create.params or {})
        storage = None
        if create.storage is not None:
            storage = {"database": str(create.storage.parts[0]), "table": str(create.storage.parts[-1])}
        fields = {
            k: options.pop(k)
            for k in (
                "embedding_model",
                "reranking_model",
                "metadata_columns",
                "content_columns",
                "id_column",
                "preprocessing",
            )
            if k in options
        }
        given = KnowledgeBaseInput(name=name, params=options or None, storage=storage, **fields)
        if create.if_not_exists and await self._kb_exists(project, name):
            return Result("ok", affected_rows=0)
        await self.knowledge_bases.create(project, given)
        return Result("ok", affected_rows=1)

    async def _dropknowledgebase(self, drop: ast.DropKnowledgeBase, db: str, params: Any) -> Result:
        project, name = two_part(drop.name, db)
        if drop.if_exists and not await self._kb_exists(project, name):
            return Result("ok", affected_rows=0)
        await self.knowledge_bases.delete(project, name)
        return Result("ok", affected_rows=1)

    async def _createagent(self, create: ast.CreateAgent, db: str, params: Any) -> Result:
        return Result("ok", affected_rows=await self.agent_sql.create(create, db))

    async def _updateagent(self, update: ast.UpdateAgent, db: str, params: Any) -> Result:
        return Result("ok", affected_rows=await self.agent_sql.update(update, db))

    async def _dropagent(self, drop: ast.DropAgent, db: str, params: Any) -> Result:
        return Result("ok", affected_rows=await self.agent_sql.drop(drop, db))

    async def _createdatabase(self, create: ast.CreateDatabase, db: str, params: Any) -> Result:
        name = one_part(create.name)
        exists = await self._is_project(name) or name.lower() in {
            s.name.lower() for s in await self.data_sources.list()
        }
        if create.if_not_exists and exists:
            return Result("ok", affected_rows=0)
        if create.engine is None or create.engine.lower() == "mindsdb":
            await self.projects.create(name, keep_case=True)
        else:
            await self.data_sources.create(name, create.engine, create.parameters or {}, keep_case=True)
        return Result("ok", affected_rows=1)

    # --- statements in sql_ddl.py ------------------------------------------------------------------
    _dropdatabase = sql_ddl.drop_database
    _alterdatabase = sql_ddl.alter_database
    _describe = sql_ddl.describe
    _update = sql_ddl.update
    _alterknowledgebase = sql_ddl.alter_knowledge_base
    _createknowledgebaseindex = sql_ddl.create_index

    # --- DML on knowledge bases ---------------------------------------------------------------------
    async def _insert(self, insert: ast.Insert, db: str, params: Any) -> Result:
        return await self.inserts.insert(insert, db)

    async def _delete(self, delete: ast.Delete, db: str, params: Any) -> Result:
        project, name = two_part(delete.table, db)
        if not await self._kb_exists(project, name):
            raise BadRequest(f"DELETE is supported on knowledge bases only; {project}.{name} is not one")
        if delete.where is None:
            raise BadRequest("DELETE needs a WHERE clause (DROP KNOWLEDGE_BASE removes everything)")
        query = parse_kb_select_ast(
            ast.Select(targets=[ast.Star()], from_table=delete.table, where=delete.where), db, params=params
        )
        if query.content is not None:
            raise BadRequest("DELETE by content is not supported; filter on id or metadata")
        _, chunks = await self.knowledge_bases.delete_documents(project, name, None, query.filters)
        return Result("ok", affected_rows=chunks)
