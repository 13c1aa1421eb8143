"""MindsDB's SQL over agentkb: parse with mindsdb-sql-parser, then run each statement by its handler.

Supported: SELECT over `information_schema.{databases,knowledge_bases,agents,queries}`, over a knowledge base
(the KB executor), over an agent (`WHERE question = ...`), and pushed down to one data source; joins,
subqueries, UNION and grouped or ordered KB/file SELECTs (planned: `select`); SHOW DATABASES /
KNOWLEDGE_BASES / AGENTS / TABLES (`show`); CREATE/DROP KNOWLEDGE_BASE, AGENT, DATABASE, PROJECT; ALTER
AGENT, KNOWLEDGE_BASE, DATABASE; DESCRIBE; UPDATE and DELETE on a knowledge base (`ddl`); INSERT INTO <kb>
SELECT ... [USING ...] / VALUES ..., DROP TABLE files.<name>, USE <database> (`insert`);
`SELECT query_cancel(<id>)` (`queries`); `SELECT kb_recrawl('<kb>')` (`recrawl`); EVALUATE KNOWLEDGE_BASE
(`evaluate`). Anything else is an error naming the statement. Every statement first passes the SQL sandbox's
name fence (`agentkb.sql.sandbox`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast
from mindsdb_sql_parser.ast import mindsdb

from agentkb.errors import BadRequest
from agentkb.service.platform import access
from agentkb.service.sql import ddl, insert, jobs, select, show
from agentkb.service.sql.context import SQLContext
from agentkb.service.sql.evaluate import EvaluateStatement
from agentkb.service.sql.handlers import HandlerTable
from agentkb.service.sql.result import Result, statement_kind
from agentkb.sql import last, sandbox
from agentkb.sql import params as sql_params
from agentkb.sql.kbquery import strip_wrappers
from agentkb.sql.parametrize import parametrize
from agentkb.sql.statements import StatementCache

if TYPE_CHECKING:
    from agentkb.service.retrieval.evaluate import EvaluateService

# what a read-only API key may run (`SELECT query_cancel(…)` is refused by its own service)
READ_STATEMENTS = (ast.Select, ast.Union, ast.Intersect, ast.Except, ast.Show, ast.Describe, ast.Use)


def statement_handlers(*, evaluations: EvaluateService | None) -> HandlerTable:
    """Every statement the endpoint runs. EVALUATE KNOWLEDGE_BASE is there only with `evaluations`: the
    endpoint that EVALUATE itself reads its tables through has none."""
    table = HandlerTable()
    table.register(ast.Select, select.select_statement)
    for operation in (ast.Union, ast.Intersect, ast.Except):
        table.register(operation, select.set_operation)
    table.register(ast.Show, show.show)
    table.register(ast.Describe, ddl.describe)
    table.register(mindsdb.CreateKnowledgeBase, ddl.create_knowledge_base)
    table.register(mindsdb.DropKnowledgeBase, ddl.drop_knowledge_base)
    table.register(mindsdb.AlterKnowledgeBase, ddl.alter_knowledge_base)
    table.register(mindsdb.CreateKnowledgeBaseIndex, ddl.create_index)
    table.register(mindsdb.CreateAgent, ddl.create_agent)
    table.register(mindsdb.UpdateAgent, ddl.update_agent)
    table.register(mindsdb.DropAgent, ddl.drop_agent)
    table.register(mindsdb.CreateDatabase, ddl.create_database)
    table.register(ast.DropDatabase, ddl.drop_database)
    table.register(mindsdb.AlterDatabase, ddl.alter_database)
    table.register(ast.Update, ddl.update)
    table.register(ast.Delete, ddl.delete)
    table.register(ast.Insert, insert.insert)
    table.register(ast.DropTables, insert.drop_tables)
    table.register(ast.Use, insert.use)
    table.register(mindsdb.CreateJob, jobs.create_job)
    table.register(mindsdb.DropJob, jobs.drop_job)
    if evaluations is not None:
        table.register(mindsdb.EvaluateKnowledgeBase, EvaluateStatement(evaluations))
    return table


class SQLService:
    """`/api/sql/query`: one statement of MindsDB's SQL, executed over the other services."""

    def __init__(self, context: SQLContext, handlers: HandlerTable) -> None:
        self.context = context
        self.handlers = handlers
        self.statements = StatementCache()

    def parametrize(self, query: str) -> dict[str, Any]:
        """MindsDB's `parametrize_constants` helper: the constants as `:name` parameters; nothing runs."""
        return asdict(parametrize(query))

    async def execute(self, sql: str, db: str, params: Mapping[str, Any] | None = None) -> Result:
        statement = self.parse(sql)
        if sql_params.needs_binding(sql, params):
            sql_params.bind(statement, params)  # `:name` and `@name`, as MindsDB binds them
        if last.statement_has_last(statement, sql):
            raise BadRequest(
                "LAST reads the rows past the previous run of a job: use it in a CREATE JOB's statements",
                title="Invalid LAST",
            )
        return await self.execute_statement(statement, db, params, sql)

    def parse(self, sql: str) -> Any:
        try:
            return self.statements.parse(strip_wrappers(sql))
        except Exception as exc:  # the parser raises many kinds of errors
            raise BadRequest(f"Invalid SQL: {exc}") from exc

    async def execute_statement(
        self, statement: Any, db: str, params: Mapping[str, Any] | None = None, sql: str | None = None
    ) -> Result:
        """A parsed statement (a job's, its LAST resolved): sandboxed, scope-checked, dispatched."""
        sandbox.check_statement(statement)  # no file, network, settings or table function, on any path
        handler = self.handlers.get(statement)
        if handler is None:
            text = (sql or statement.to_string()).strip()[:80]
            raise BadRequest(f"Unsupported statement: {type(statement).__name__} ({text})")
        if last.statement_has_last(statement, sql):
            raise BadRequest(last.WHERE_TO_USE, title="Invalid LAST")
        if not isinstance(statement, READ_STATEMENTS):
            access.require_write(f"SQL {statement_kind(statement)}")
        result = await handler(self.context, statement, db, params)
        if result.db == "mindsdb" and db != "mindsdb" and not isinstance(statement, ast.Use):
            result.db = db
        return result
