"""SELECT on the SQL endpoint, and UNION / INTERSECT / EXCEPT.

The plain path: `information_schema.<table>`, one knowledge base (`retrieval`'s KB executor), an agent as a
table, an uploaded file (`files.<name>`) or one data source's table (pushed down). What the plain path cannot
answer is planned (`agentkb.sql.plan`): joins, subqueries and CTEs in FROM, native queries, set operations,
and GROUP BY, aggregates, DISTINCT, ORDER BY or expressions over a KB or a file. Each source is then fetched
through its own service (a KB through its search, a data-source table through pushdown, an uploaded file
through the file service, an agent through completions, a subquery through this module), and the statement
runs over the fetched rows in an in-process DuckDB (`sql.frames`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest, NotFound
from agentkb.ingest.files.tables import Tabular
from agentkb.service.ingest.query_sources import FILES
from agentkb.service.retrieval.search import KnowledgeBaseGone
from agentkb.service.sql import jobs
from agentkb.service.sql.context import SQLContext
from agentkb.service.sql.recrawl import kb_recrawl
from agentkb.service.sql.result import Result, jsonable, table
from agentkb.sql import catalog, frames, plan, pushdown
from agentkb.sql.frames import Frame
from agentkb.sql.names import two_part

if TYPE_CHECKING:
    from sqlalchemy import Engine

MAX_SOURCE_ROWS = 100_000  # rows one source may bring into a planned statement
MAX_AGENT_QUESTIONS = 100  # questions one statement may put to an agent
_SET_OPERATIONS = {ast.Union: "UNION", ast.Intersect: "INTERSECT", ast.Except: "EXCEPT"}
Params = Mapping[str, Any] | None


def needs_planner(select: ast.Select) -> bool:
    """True for a SELECT over one KB or file that the plain path cannot answer."""
    if plan.is_grouped(select) or select.order_by or select.cte:
        return True
    for target in select.targets:
        plain = isinstance(target, (ast.Star, ast.Identifier))
        json_access = isinstance(target, ast.BinaryOperation) and target.op in ("->>", "->")
        if not (plain or json_access):
            return True
    return False


# --- the handlers -----------------------------------------------------------------------------------------
async def select_statement(ctx: SQLContext, select: ast.Select, db: str, params: Params) -> Result:
    if select.from_table is None and (answer := await ctx.queries.service_function(select)):
        return answer
    if select.from_table is None and (answer := await kb_recrawl(ctx, select, db)):
        return answer
    if select.from_table is None:
        raise BadRequest("SELECT without FROM is not supported")
    if select.cte or not isinstance(select.from_table, ast.Identifier):
        return await planned(ctx, select, db, params)  # joins, subqueries, native queries
    parts = [str(p) for p in select.from_table.parts]
    if parts[0].lower() == "information_schema" and len(parts) == 2:
        return await ctx.information_schema(select, parts[1].lower(), db)
    namespace, name = two_part(select.from_table, db) if len(parts) <= 2 else (parts[0], parts[1])
    if namespace.lower() == "log" and name.lower() == "jobs_history":  # MindsDB's log database
        return await jobs.history_table(ctx, select, db)
    known = ctx.search.cached(namespace.lower(), name)  # a KB searched before: its search validates it
    if known is not None or await ctx.is_project(namespace):
        project = namespace.lower()
        try:  # one lookup: a knowledge base, else an agent
            kb = known or await ctx.search.knowledge_base(project, name)
        except NotFound:
            if name.lower() in jobs.PROJECT_TABLES:  # a project's jobs / jobs_history (a KB may shadow them)
                return await jobs.project_table(ctx, select, project, name.lower(), db)
            columns, rows = await ctx.agent_sql.select(select, project, name)
            return table(columns, rows)
        if needs_planner(select):  # GROUP BY, aggregates, ORDER BY, expressions: DuckDB
            return await planned(ctx, select, db, params)
        try:
            columns, rows = await ctx.kb_select.select(kb, select, db, params)
        except KnowledgeBaseGone:  # dropped by another process since this one cached it
            if known is None:
                raise
            return await select_statement(ctx, select, db, params)  # now uncached: looked up by name
        return table(columns, rows, db=db)
    if namespace.lower() == FILES:
        if needs_planner(select):
            if len(parts) == 1:  # `USE files`: a bare name is a file; the planner wants it qualified
                select.from_table = ast.Identifier(parts=[FILES, parts[0]], alias=select.from_table.alias)
            return await planned(ctx, select, db, params)
        return await _file_select(ctx, select, name)
    if len(parts) == 1:  # a bare table in a data source's context: qualify it for the pushdown
        select.from_table = ast.Identifier(parts=[namespace, parts[0]], alias=select.from_table.alias)
    return await ctx.pushdown(select)


async def set_operation(ctx: SQLContext, statement: Any, db: str, params: Params) -> Result:
    """UNION, INTERSECT and EXCEPT."""
    return await planned(ctx, statement, db, params)


async def planned(ctx: SQLContext, statement: Any, db: str, params: Params) -> Result:
    frame = await _frame(ctx, statement, db, params)
    return table(frame.columns, [[jsonable(v) for v in row] for row in frame.rows], db=db)


async def _file_select(ctx: SQLContext, select: ast.Select, name: str) -> Result:
    """`SELECT ... FROM files.<name>`: the rows of an uploaded table file (CSV, XLSX, JSON)."""
    parsed = await ctx.files.open_parsed(name.lower())
    if not isinstance(parsed, Tabular):
        raise BadRequest(f"File {name} is a document, not a table; insert it into a knowledge base instead")
    columns, data = catalog.select_rows(select, parsed.columns, parsed.rows)
    return table(columns, [[jsonable(v) for v in row] for row in data])


# --- planned statements -----------------------------------------------------------------------------------
async def _frame(ctx: SQLContext, statement: Any, db: str, params: Params) -> Frame:
    if type(statement) in _SET_OPERATIONS:
        left = await _subquery(ctx, statement.left, db, params)
        right = await _subquery(ctx, statement.right, db, params)
        op = _SET_OPERATIONS[type(statement)] + ("" if statement.unique else " ALL")
        sql = f'SELECT * FROM "l" {op} SELECT * FROM "r"'
        return await asyncio.to_thread(frames.query, {"l": left, "r": right}, sql)
    if not isinstance(statement, ast.Select):
        raise BadRequest(f"Unsupported subquery: {type(statement).__name__}")
    return await _planned_select(ctx, statement, db, params)


async def _subquery(ctx: SQLContext, statement: Any, db: str, params: Params) -> Frame:
    """Any SELECT (fast paths included) as rows."""
    if isinstance(statement, ast.Select):
        result = await select_statement(ctx, statement, db, params)
        return Frame(list(result.column_names), [list(r) for r in result.data])
    return await _frame(ctx, statement, db, params)


async def _planned_select(ctx: SQLContext, select: ast.Select, db: str, params: Params) -> Frame:
    if select.from_table is None:
        raise BadRequest("SELECT without FROM is not supported")
    ctes: dict[str, Any] = {str(c.name.parts[-1]).lower(): c.query for c in select.cte or []}
    leaves = plan.leaves(select.from_table)
    kinds = {id(leaf): await _kind(ctx, leaf, db, ctes) for leaf in leaves}
    if set(kinds.values()) == {"datasource"}:
        names = {_source_name(leaf, db) for leaf in leaves}
        if len(names) == 1:  # all in one data source: it runs the whole statement
            for leaf in leaves:
                if len(leaf.parts) == 1:
                    leaf.parts = [db, *leaf.parts]
            result = await ctx.pushdown(select)
            return Frame(list(result.column_names), [list(r) for r in result.data])
    planned = plan.Planner(select, kinds).plan()
    sql = frames.to_duckdb(planned.outer.to_string(), [s.key for s in planned.sources])
    fetched: dict[str, Frame] = {}
    by_alias: dict[str, Frame] = {}
    for source in planned.sources:
        frame = await _fetch(ctx, source, db, params, by_alias, ctes)
        fetched[source.key] = frame
        by_alias[source.alias.lower()] = frame
    return await asyncio.to_thread(frames.query, fetched, sql)


# --- what each table is ---------------------------------------------------------------------------
async def _kind(ctx: SQLContext, leaf: Any, db: str, ctes: dict[str, Any]) -> str:
    if isinstance(leaf, ast.NativeQuery):
        return "native"
    if not isinstance(leaf, ast.Identifier):
        return "subquery"
    parts = [str(p) for p in leaf.parts]
    if len(parts) == 1 and parts[0].lower() in ctes:
        return "cte"
    namespace = parts[0] if len(parts) > 1 else db
    if namespace.lower() == "information_schema" and len(parts) == 2:
        return "catalog"
    if namespace.lower() == "files" and len(parts) == 2:
        return "files"
    if len(parts) <= 2 and await ctx.is_project(namespace):
        if await ctx.kb_exists(namespace.lower(), parts[-1]):
            return "kb"
        await ctx.agents.get(namespace.lower(), parts[-1])  # 404 when it is neither
        return "agent"
    return "datasource"


# --- fetching -------------------------------------------------------------------------------------
async def _fetch(
    ctx: SQLContext,
    source: plan.Source,
    db: str,
    params: Params,
    by_alias: dict[str, Frame],
    ctes: dict[str, Any],
) -> Frame:
    node = source.node
    if source.kind == "kb":
        limit = ast.Constant(source.limit) if source.limit is not None else None
        sub = ast.Select(targets=[ast.Star()], from_table=node, where=source.where, limit=limit)
        project, name = _project_name(node, db)
        kb = await ctx.search.knowledge_base(project, name)
        columns, rows = await ctx.kb_select.select(kb, sub, db, params)
        return Frame(columns, rows)
    if source.kind == "datasource":
        return await _datasource(ctx, source, db, by_alias)
    if source.kind == "agent":
        return await _agent(ctx, source, db, by_alias)
    if source.kind == "files":
        parsed = await ctx.files.open_parsed(str(node.parts[-1]).lower())
        if not isinstance(parsed, Tabular):
            raise BadRequest(f"File {node.parts[-1]} is a document, not a table")
        frame = Frame(list(parsed.columns), [[r.get(c) for c in parsed.columns] for r in parsed.rows])
    elif source.kind == "native":
        engine, dialect = await ctx.data_sources.engine_for(str(node.integration.parts[-1]))
        sql = await asyncio.to_thread(pushdown.native_select, node.query, dialect)
        frame = await asyncio.to_thread(_stream, engine, sql)
    elif source.kind == "catalog":
        star = ast.Select(targets=[ast.Star()], from_table=node)
        result = await ctx.information_schema(star, str(node.parts[-1]).lower(), db)
        frame = Frame(list(result.column_names), [list(r) for r in result.data])
    else:  # a subquery or a CTE
        query = ctes[str(node.parts[-1]).lower()] if source.kind == "cte" else node
        frame = await _subquery(ctx, query, db, params)
    return await _filter(frame, source)


async def _filter(frame: Frame, source: plan.Source) -> Frame:
    """The source's own conditions and limit, applied to rows fetched whole."""
    if source.where is None and source.limit is None:
        return frame
    limit = ast.Constant(source.limit) if source.limit is not None else None
    alias = ast.Identifier(source.alias)
    select = ast.Select(
        targets=[ast.Star()], from_table=ast.Identifier(parts=["x"], alias=alias), where=source.where
    )
    select.limit = limit
    sql = frames.to_duckdb(select.to_string(), ["x"])
    return await asyncio.to_thread(frames.query, {"x": frame}, sql)


async def _datasource(ctx: SQLContext, source: plan.Source, db: str, by_alias: dict[str, Frame]) -> Frame:
    node = source.node
    table = node if len(node.parts) > 1 else ast.Identifier(parts=[db, *node.parts], alias=node.alias)
    conditions = [source.where] if source.where is not None else []
    if source.join_in is not None:
        column, other, other_column = source.join_in
        values = _distinct(by_alias[other.lower()], other_column)
        if values is not None:
            target = ast.Identifier(parts=[source.alias, column])
            if values:
                items = [ast.Constant(str(v) if isinstance(v, int) else v) for v in values]
                conditions.append(ast.BinaryOperation(op="in", args=[target, ast.Tuple(items)]))
            else:
                conditions.append(ast.BinaryOperation(op="=", args=[ast.Constant(1), ast.Constant(0)]))
    select = ast.Select(targets=[ast.Star()], from_table=table, where=plan.conjoin(conditions))
    if source.limit is not None:
        select.limit = ast.Constant(source.limit)
    query = await asyncio.to_thread(pushdown.parse_select, select.to_string())
    engine, dialect = await ctx.data_sources.engine_for(query.datasource)
    return await asyncio.to_thread(_stream, engine, query.render(dialect))


async def _agent(ctx: SQLContext, source: plan.Source, db: str, by_alias: dict[str, Frame]) -> Frame:
    project, name = _project_name(source.node, db)
    assert source.question is not None
    alias, column = source.question
    partner = by_alias[alias.lower()]
    questions = _distinct(partner, column, limit=None)
    if questions is None:
        raise BadRequest(f"Questions for agent {name} must be text: {alias}.{column} is not")
    if len(questions) > MAX_AGENT_QUESTIONS:
        raise BadRequest(
            f"The query puts {len(questions)} questions to agent {name}; at most {MAX_AGENT_QUESTIONS} "
            "per query: filter the table or LIMIT it"
        )
    rows = [[await ctx.agent_answer(project, name, str(q)), q] for q in questions]
    return Frame(["answer", "question"], rows)


def _source_name(node: ast.Identifier, db: str) -> str:
    return str(node.parts[0]).lower() if len(node.parts) > 1 else db.lower()


def _project_name(node: ast.Identifier, db: str) -> tuple[str, str]:
    parts = [str(p) for p in node.parts]
    return (parts[0].lower(), parts[1]) if len(parts) == 2 else (db.lower(), parts[-1])


def _distinct(frame: Frame, column: str, limit: int | None = plan.MAX_IN_VALUES) -> list[Any] | None:
    """The distinct non-null values of a column (None: not all text or integers, or too many)."""
    index = next((i for i, c in enumerate(frame.columns) if c.lower() == column.lower()), None)
    if index is None:
        raise BadRequest(f"Column is not found: {column}")
    values: list[Any] = []
    seen: set[Any] = set()
    for row in frame.rows:
        value = row[index]
        if value is None or value in seen:
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            return None
        seen.add(value)
        values.append(value)
        if limit is not None and len(values) > limit:
            return None
    return values


def _stream(engine: Engine, sql: str) -> Frame:
    columns: list[str] = []
    rows: list[list[Any]] = []
    stream = pushdown.stream_rows(engine, sql, 1000)
    try:
        for columns, batch in stream:
            rows.extend([row[c] for c in columns] for row in batch)
            if len(rows) > MAX_SOURCE_ROWS:
                raise BadRequest(
                    f"A table of the query gives more than {MAX_SOURCE_ROWS} rows: add conditions on it"
                )
    finally:
        stream.close()
    return Frame(columns, rows)
