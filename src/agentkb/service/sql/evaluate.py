"""`EVALUATE KNOWLEDGE_BASE [<project>.]<kb> USING test_table = files.<name>, generate_data = …, …` on the SQL
endpoint (the evaluate service does the work), and `SQLTables`: the tables EVALUATE reads and writes, as the
SQL endpoint sees them. Reads go through an SQL endpoint of their own (`files.<name>`, a data source's
table, a knowledge base: every statement but EVALUATE); writes go to `files.<name>` only (a JSON table
file), as agentkb's data sources are read-only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import orjson
from mindsdb_sql_parser import ast, parse_sql

from agentkb.errors import AgentKBError, BadRequest
from agentkb.ingest.files.tables import Tabular
from agentkb.service.catalog.files import check_file_name
from agentkb.service.ingest.query_sources import FILES
from agentkb.service.retrieval.evaluate import evaluate_input
from agentkb.service.sql.context import SQLContext
from agentkb.service.sql.result import Result, jsonable, table
from agentkb.sql.names import two_part

if TYPE_CHECKING:
    from agentkb.service.catalog.files import FileService
    from agentkb.service.retrieval.evaluate import EvaluateService


class Executor(Protocol):
    """What SQLTables reads through: an SQL endpoint (`service.SQLService`)."""

    async def execute(self, sql: str, db: str, params: Mapping[str, Any] | None = None) -> Result: ...


def _plain(value: Any) -> Any:
    """A USING value as evaluate_input takes it: identifiers as their parts, containers recursively."""
    if isinstance(value, ast.Identifier):
        return [str(p) for p in value.parts]
    if isinstance(value, ast.Constant):
        return value.value
    if isinstance(value, dict):
        return {str(k).lower(): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class EvaluateStatement:
    """The EVALUATE KNOWLEDGE_BASE handler: a statement of the table only where an evaluate service is."""

    def __init__(self, evaluations: EvaluateService) -> None:
        self.evaluations = evaluations

    async def __call__(
        self, ctx: SQLContext, statement: ast.EvaluateKnowledgeBase, db: str, params: Any
    ) -> Result:
        project, name = two_part(statement.name, db)
        given = {str(k).lower(): _plain(v) for k, v in (statement.params or {}).items()}
        outcome = await self.evaluations.evaluate(project, name, evaluate_input(given), db=db)
        if outcome.answer is None:  # evaluate = false: MindsDB answers an empty table
            return table([], [], db=db)
        columns = list(outcome.answer)
        return table(columns, [[jsonable(outcome.answer[c]) for c in columns]], db=db)


class SQLTables:
    """`retrieval.evaluate.Tables` over the SQL endpoint and the uploaded files."""

    def __init__(self, sql: Executor, files: FileService) -> None:
        self.sql = sql
        self.files = files

    async def _rows(self, select: ast.Select, db: str) -> list[dict[str, Any]]:
        query = select.to_string()
        try:
            result = await self.sql.execute(query, db)
        except AgentKBError:
            raise
        except Exception as exc:  # a data source's own errors: the query named there is the caller's
            raise BadRequest(f"{query} failed: {type(exc).__name__}: {exc}") from exc
        if result.kind != "table":
            raise BadRequest(f"{query} returned no table")
        return [dict(zip(result.column_names, row, strict=False)) for row in result.data]

    async def select(self, sql: str, db: str, default_limit: int) -> list[dict[str, Any]]:
        try:
            query = parse_sql(sql)
        except Exception as exc:  # the parser raises many kinds of errors
            raise BadRequest(f"Query not supported {sql}: {exc}") from exc
        if not isinstance(query, ast.Select) or query.from_table is None:
            raise BadRequest(f"Query not supported {sql} (generate_data.from_sql must be a SELECT … FROM …)")
        if query.limit is None:
            query.limit = ast.Constant(default_limit)
        return await self._rows(query, db)

    async def read(self, table: Sequence[str], db: str) -> list[dict[str, Any]]:
        select = ast.Select(targets=[ast.Star()], from_table=ast.Identifier(parts=list(table)))
        return await self._rows(select, db)

    async def write(self, table: Sequence[str], rows: list[dict[str, Any]], *, replace: bool) -> None:
        """Replace or append to the table file `files.<name>` (MindsDB: drop and create, or insert)."""
        if len(table) != 2 or table[0].lower() != FILES:
            raise BadRequest(
                f"EVALUATE writes tables to files.<name> only (agentkb's data sources are read-only), not "
                f"{'.'.join(table)}"
            )
        name = check_file_name(table[1])
        existing = await self.files.find(name)
        if existing is not None:
            if not replace:
                parsed = await self.files.open_parsed(name)
                if isinstance(parsed, Tabular):
                    rows = [*parsed.rows, *rows]
            await self.files.delete(name)
        rows = [{k: jsonable(v) for k, v in row.items()} for row in rows]
        data = orjson.dumps(rows, default=str, option=orjson.OPT_NON_STR_KEYS)

        async def content() -> AsyncIterator[bytes]:
            yield data

        await self.files.save(name, content(), original_name=f"{name}.json", content_type="application/json")
