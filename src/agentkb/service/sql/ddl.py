"""MindsDB statements that change or describe what exists: `UPDATE <kb> SET … WHERE chunk_id = …`,
`DESCRIBE KNOWLEDGE_BASE | AGENT | DATABASE`, `ALTER KNOWLEDGE_BASE … USING`, `CREATE INDEX ON KNOWLEDGE_BASE`,
`ALTER DATABASE <project> NAME = …`, `CREATE / DROP KNOWLEDGE_BASE`, `CREATE DATABASE`, `DROP DATABASE` (exact
names, as MindsDB), `CREATE / ALTER / DROP AGENT` (`agents.AgentStatements` reads them) and `DELETE FROM <kb>`.
Each is a handler of the statement table (`service.statement_handlers`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest, NotFound
from agentkb.service.catalog.knowledge_bases import KnowledgeBaseInput
from agentkb.service.sql.context import SQLContext
from agentkb.service.sql.queries import kb_query_columns
from agentkb.service.sql.result import Result, ok, table
from agentkb.sql import catalog, names
from agentkb.sql.kbquery import parse_kb_select_ast
from agentkb.timestamps import optional_timestamp

DESCRIBE_KB_COLUMNS = [
    *catalog.KB_COLUMNS,
    "INSERT_STARTED_AT",
    "INSERT_FINISHED_AT",
    "PROCESSED_ROWS",
    "ERROR",
    "QUERY_ID",
]
_JSON_COLUMNS = ("EMBEDDING_MODEL", "RERANKING_MODEL", "METADATA_COLUMNS", "CONTENT_COLUMNS", "PARAMS")
_DESCRIBABLE = {"KNOWLEDGE_BASE": "knowledge_bases", "AGENT": "agents", "DATABASE": "databases"}
_UPDATE_HINT = "UPDATE <kb> SET content = '…'[, metadata = '{…}'] WHERE chunk_id = '…'"


def _value(node: ast.ASTNode, params: Mapping[str, Any] | None, what: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Parameter):
        key = str(node.value)
        if params is None or key not in params:
            raise BadRequest(f"Parameter is not set: {key}")
        return params[key]
    raise BadRequest(f"{what} must be a literal value, got {node.to_string()}")


# --- DESCRIBE -----------------------------------------------------------------------------------------
async def describe(ctx: SQLContext, statement: ast.Describe, db: str, params: Any) -> Result:
    """MindsDB answers DESCRIBE <kind> <name> with that object's information_schema row; a knowledge base's
    also tells of its last insert (agentkb: its latest ingestion job)."""
    kind = (statement.type or "").upper().replace(" ", "_")
    kind = kind[:-1] if kind.endswith("S") and kind[:-1] in _DESCRIBABLE else kind
    if kind in ("", "MODEL", "PREDICTOR"):
        project, name = names.two_part(statement.value, db)
        if kind or not await ctx.kb_exists(project, name):
            raise BadRequest(
                f"DESCRIBE {statement.value.to_string()} describes a model; agentkb has no models: use DESCRIBE "
                "KNOWLEDGE_BASE <name> or DESCRIBE AGENT <name>"
            )
        kind = "KNOWLEDGE_BASE"
    if kind not in _DESCRIBABLE:
        raise BadRequest(
            f"Unsupported statement: DESCRIBE {statement.type} (use KNOWLEDGE_BASE, AGENT or DATABASE)"
        )
    if kind == "DATABASE":
        where: ast.ASTNode = ast.BinaryOperation(
            "=", args=[ast.Identifier("name"), ast.Constant(names.one_part(statement.value))]
        )
        select = ast.Select(
            targets=[ast.Star()], from_table=ast.Identifier("information_schema.databases"), where=where
        )
        return await ctx.information_schema(select, "databases", db)
    project, name = names.two_part(statement.value, db)
    if kind == "AGENT":
        rows = [r for r in await ctx.agent_rows(None) if r["NAME"] == name and r["PROJECT"] == project]
        columns = catalog.AGENT_COLUMNS
        return table(columns, [[r[c] for c in columns] for r in rows], db=db)
    return table(DESCRIBE_KB_COLUMNS, await _describe_kb(ctx, project, name), db=db)


async def _describe_kb(ctx: SQLContext, project: str, name: str) -> list[list[Any]]:
    try:
        kb = await ctx.knowledge_bases.get(project, name)
    except NotFound:
        return []  # MindsDB: an empty answer (a SELECT that matched nothing)
    row = catalog.kb_row(kb)
    row["RERANKING_MODEL"] = row["RERANKING_MODEL"] or {}  # MindsDB stores {} for "no reranking model"
    for column in _JSON_COLUMNS:
        row[column] = None if row[column] is None else json.dumps(row[column])
    job = await ctx.kb_admin.last_job(kb)
    if job is not None and job.sql is not None:  # a SQL INSERT: its information_schema.queries record
        row.update(kb_query_columns(job))
    elif job is not None:
        row.update(
            INSERT_STARTED_AT=optional_timestamp(job.started_at or job.created_at),
            INSERT_FINISHED_AT=optional_timestamp(job.finished_at),
            PROCESSED_ROWS=int(job.counts.get("documents", 0) or 0),
            ERROR=job.error,
            QUERY_ID=job.id,
        )
    return [[row.get(c) for c in DESCRIBE_KB_COLUMNS]]


# --- UPDATE <kb> ---------------------------------------------------------------------------------------
def _conditions(where: ast.ASTNode | None, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """`col = value [AND …]` → {col: value}."""
    if isinstance(where, ast.BinaryOperation) and where.op.lower() == "and":
        return {**_conditions(where.args[0], params), **_conditions(where.args[1], params)}
    if (
        isinstance(where, ast.BinaryOperation)
        and where.op == "="
        and isinstance(where.args[0], ast.Identifier)
    ):
        return {str(where.args[0].parts[-1]).lower(): _value(where.args[1], params, "A WHERE value")}
    shown = where.to_string() if where is not None else "none"
    raise BadRequest(f"UPDATE of a knowledge base needs WHERE chunk_id = '…' (got {shown}): {_UPDATE_HINT}")


async def update(ctx: SQLContext, statement: ast.Update, db: str, params: Any) -> Result:
    project, name = names.two_part(statement.table, db)
    if not await ctx.kb_exists(project, name):
        raise BadRequest(
            f"UPDATE is supported on knowledge bases only ({_UPDATE_HINT}); {project}.{name} is not one. "
            "Data sources are read-only."
        )
    if statement.from_select is not None:
        raise BadRequest(f"UPDATE … FROM (SELECT …) is not supported; use {_UPDATE_HINT}")
    conditions = _conditions(statement.where, params)
    if set(conditions) != {"chunk_id"}:
        raise BadRequest(f"UPDATE of a knowledge base selects one chunk by chunk_id only: {_UPDATE_HINT}")
    values = {k.lower(): _value(v, params, k) for k, v in (statement.update_columns or {}).items()}
    content = values.pop("content", values.pop("chunk_content", None))
    metadata = values.pop("metadata", None)
    if values or (content is None and metadata is None):
        raise BadRequest(f"UPDATE of a knowledge base sets content and/or metadata: {_UPDATE_HINT}")
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except ValueError as exc:
            raise BadRequest(f"metadata must be a JSON object: {exc}") from exc
    changed = await ctx.kb_admin.update_chunk(
        project, name, str(conditions["chunk_id"]), content=content, metadata=metadata
    )
    return ok(affected_rows=changed)


# --- ALTER KNOWLEDGE_BASE, CREATE INDEX ON KNOWLEDGE_BASE ---------------------------------------------
async def alter_knowledge_base(
    ctx: SQLContext, statement: ast.AlterKnowledgeBase, db: str, params: Any
) -> Result:
    project, name = names.two_part(statement.name, db)
    await ctx.kb_admin.alter(project, name, dict(statement.params or {}))
    return ok()


async def create_index(
    ctx: SQLContext, statement: ast.CreateKnowledgeBaseIndex, db: str, params: Any
) -> Result:
    project, name = names.two_part(statement.name, db)
    await ctx.kb_admin.rebuild_index(project, name, dict(statement.params or {}))
    return ok()


# --- projects and agents ----------------------------------------------------------------------------------
async def alter_database(ctx: SQLContext, statement: ast.AlterDatabase, db: str, params: Any) -> Result:
    """`ALTER DATABASE <project> NAME = '<new name>'` renames a project (a back-quoted name is matched
    exactly, an unquoted one in any case, as MindsDB's `strict_case`)."""
    name, exact = names.one_part(statement.name), names.is_quoted(statement.name)
    given = dict(statement.params or {})
    if not await ctx.is_project(name):
        if await ctx.data_source_exists(name):
            raise BadRequest(
                f"ALTER DATABASE {name}: agentkb cannot change a data source's parameters; drop it and create "
                "it again (DROP DATABASE, then CREATE DATABASE … WITH ENGINE = …, PARAMETERS = {…})"
            )
        raise NotFound(f"Database does not exist: {name}", title="Database not found")
    if set(given) != {"name"}:
        raise BadRequest(
            "Only the 'name' field can be updated for projects: ALTER DATABASE <project> NAME = '…'"
        )
    await ctx.projects.rename(name, given["name"], exact=exact)
    return ok()


async def drop_database(ctx: SQLContext, statement: ast.DropDatabase, db: str, params: Any) -> Result:
    """A project or a data source, spelt exactly as stored (MindsDB's DROP DATABASE: an unquoted name is
    lower-cased, then matched exactly)."""
    name = names.one_part(statement.name)
    try:
        project = await ctx.projects.get(name)
    except NotFound:
        project = None
    if project is not None and project.name == name:
        await ctx.projects.delete(name, exact=True)
        return ok(affected_rows=1)
    try:
        await ctx.data_sources.delete(name, exact=True)
    except NotFound:
        if not statement.if_exists:
            raise
    return ok(affected_rows=1)


async def create_knowledge_base(
    ctx: SQLContext, create: ast.CreateKnowledgeBase, db: str, params: Any
) -> Result:
    project, name = names.two_part(create.name, db)
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
    if create.if_not_exists and await ctx.kb_exists(project, name):
        return ok(affected_rows=0)
    await ctx.knowledge_bases.create(project, given)
    return ok(affected_rows=1)


async def drop_knowledge_base(ctx: SQLContext, drop: ast.DropKnowledgeBase, db: str, params: Any) -> Result:
    project, name = names.two_part(drop.name, db)
    if drop.if_exists and not await ctx.kb_exists(project, name):
        return ok(affected_rows=0)
    await ctx.knowledge_bases.delete(project, name)
    return ok(affected_rows=1)


async def create_agent(ctx: SQLContext, create: ast.CreateAgent, db: str, params: Any) -> Result:
    return ok(affected_rows=await ctx.agent_sql.create(create, db))


async def update_agent(ctx: SQLContext, update: ast.UpdateAgent, db: str, params: Any) -> Result:
    return ok(affected_rows=await ctx.agent_sql.update(update, db))


async def drop_agent(ctx: SQLContext, drop: ast.DropAgent, db: str, params: Any) -> Result:
    return ok(affected_rows=await ctx.agent_sql.drop(drop, db))


async def create_database(ctx: SQLContext, create: ast.CreateDatabase, db: str, params: Any) -> Result:
    name = names.one_part(create.name)
    exists = await ctx.is_project(name) or name.lower() in {
        s.name.lower() for s in await ctx.data_sources.list()
    }
    if create.if_not_exists and exists:
        return ok(affected_rows=0)
    if create.engine is None or create.engine.lower() == "mindsdb":
        await ctx.projects.create(name, keep_case=True)
    else:
        await ctx.data_sources.create(name, create.engine, create.parameters or {}, keep_case=True)
    return ok(affected_rows=1)


# --- DELETE FROM <kb> -------------------------------------------------------------------------------------
async def delete(ctx: SQLContext, delete: ast.Delete, db: str, params: Any) -> Result:
    project, name = names.two_part(delete.table, db)
    if not await ctx.kb_exists(project, name):
        raise BadRequest(f"DELETE is supported on knowledge bases only; {project}.{name} is not one")
    if delete.where is None:
        raise BadRequest("DELETE needs a WHERE clause (DROP KNOWLEDGE_BASE removes everything)")
    query = parse_kb_select_ast(
        ast.Select(targets=[ast.Star()], from_table=delete.table, where=delete.where), db, params=params
    )
    if query.content is not None:
        raise BadRequest("DELETE by content is not supported; filter on id or metadata")
    _, chunks = await ctx.knowledge_bases.delete_documents(project, name, None, query.filters)
    return ok(affected_rows=chunks)
