"""MindsDB statements that change or describe what exists: `UPDATE <kb> SET … WHERE chunk_id = …`,
`DESCRIBE KNOWLEDGE_BASE | AGENT | DATABASE`, `ALTER KNOWLEDGE_BASE … USING`, `CREATE INDEX ON KNOWLEDGE_BASE`,
`ALTER DATABASE <project> NAME = …`, `UPDATE AGENT … SET`, `DROP DATABASE` (exact names, as MindsDB) and
`SHOW TABLES FROM agentkb_pgvector`. `SQLService` binds each as its `_<statement>` method."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest, NotFound
from agentkb.service.knowledge_bases import VECTOR_DATABASE
from agentkb.service.sql_queries import kb_query_columns
from agentkb.sql import catalog, names
from agentkb.timestamps import optional_timestamp

if TYPE_CHECKING:
    from agentkb.service.sql import Result, SQLService

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


def _result(
    kind: str, columns: list[str] | None = None, data: list[list[Any]] | None = None, **kw: Any
) -> Result:
    from agentkb.service.sql import Result  # noqa: PLC0415 - sql.py imports this module

    return Result(kind, columns or [], data or [], **kw)


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
async def describe(svc: SQLService, statement: ast.Describe, db: str, params: Any) -> Result:
    """MindsDB answers DESCRIBE <kind> <name> with that object's information_schema row; a knowledge base's
    also tells of its last insert (agentkb: its latest ingestion job)."""
    kind = (statement.type or "").upper().replace(" ", "_")
    kind = kind[:-1] if kind.endswith("S") and kind[:-1] in _DESCRIBABLE else kind
    if kind in ("", "MODEL", "PREDICTOR"):
        project, name = names.two_part(statement.value, db)
        if kind or not await svc._kb_exists(project, name):
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
        return await svc._information_schema(select, "databases", db)
    project, name = names.two_part(statement.value, db)
    if kind == "AGENT":
        rows = [r for r in await svc._agent_rows(None) if r["NAME"] == name and r["PROJECT"] == project]
        columns = catalog.AGENT_COLUMNS
        return _result("table", columns, [[r[c] for c in columns] for r in rows], db=db)
    return _result("table", DESCRIBE_KB_COLUMNS, await _describe_kb(svc, project, name), db=db)


async def _describe_kb(svc: SQLService, project: str, name: str) -> list[list[Any]]:
    try:
        kb = await svc.knowledge_bases.get(project, name)
    except NotFound:
        return []  # MindsDB: an empty answer (a SELECT that matched nothing)
    row = catalog.kb_row(kb)
    row["RERANKING_MODEL"] = row["RERANKING_MODEL"] or {}  # MindsDB stores {} for "no reranking model"
    for column in _JSON_COLUMNS:
        row[column] = None if row[column] is None else json.dumps(row[column])
    job = await svc.kb_admin.last_job(kb)
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


async def update(svc: SQLService, statement: ast.Update, db: str, params: Any) -> Result:
    project, name = names.two_part(statement.table, db)
    if not await svc._kb_exists(project, name):
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
    changed = await svc.kb_admin.update_chunk(
        project, name, str(conditions["chunk_id"]), content=content, metadata=metadata
    )
    return _result("ok", affected_rows=changed)


# --- ALTER KNOWLEDGE_BASE, CREATE INDEX ON KNOWLEDGE_BASE ---------------------------------------------
async def alter_knowledge_base(
    svc: SQLService, statement: ast.AlterKnowledgeBase, db: str, params: Any
) -> Result:
    project, name = names.two_part(statement.name, db)
    await svc.kb_admin.alter(project, name, dict(statement.params or {}))
    return _result("ok")


async def create_index(
    svc: SQLService, statement: ast.CreateKnowledgeBaseIndex, db: str, params: Any
) -> Result:
    project, name = names.two_part(statement.name, db)
    await svc.kb_admin.rebuild_index(project, name, dict(statement.params or {}))
    return _result("ok")


# --- projects and agents ----------------------------------------------------------------------------------
async def alter_database(svc: SQLService, statement: ast.AlterDatabase, db: str, params: Any) -> Result:
    """`ALTER DATABASE <project> NAME = '<new name>'` renames a project (a back-quoted name is matched
    exactly, an unquoted one in any case, as MindsDB's `strict_case`)."""
    name, exact = names.one_part(statement.name), names.is_quoted(statement.name)
    given = dict(statement.params or {})
    if not await svc._is_project(name):
        if await _data_source_exists(svc, name):
            raise BadRequest(
                f"ALTER DATABASE {name}: agentkb cannot change a data source's parameters; drop it and create "
                "it again (DROP DATABASE, then CREATE DATABASE … WITH ENGINE = …, PARAMETERS = {…})"
            )
        raise NotFound(f"Database does not exist: {name}", title="Database not found")
    if set(given) != {"name"}:
        raise BadRequest(
            "Only the 'name' field can be updated for projects: ALTER DATABASE <project> NAME = '…'"
        )
    await svc.projects.rename(name, given["name"], exact=exact)
    return _result("ok")


async def _data_source_exists(svc: SQLService, name: str) -> bool:
    try:
        await svc.data_sources.get(name)
    except NotFound:
        return False
    return True


async def drop_database(svc: SQLService, statement: ast.DropDatabase, db: str, params: Any) -> Result:
    """A project or a data source, spelt exactly as stored (MindsDB's DROP DATABASE: an unquoted name is
    lower-cased, then matched exactly)."""
    name = names.one_part(statement.name)
    try:
        project = await svc.projects.get(name)
    except NotFound:
        project = None
    if project is not None and project.name == name:
        await svc.projects.delete(name, exact=True)
        return _result("ok", affected_rows=1)
    try:
        await svc.data_sources.delete(name, exact=True)
    except NotFound:
        if not statement.if_exists:
            raise
    return _result("ok", affected_rows=1)


async def vector_tables(svc: SQLService, database: str) -> list[str] | None:
    """`SHOW TABLES FROM agentkb_pgvector` (the STORAGE every knowledge base names): their chunk tables;
    None for another database."""
    if database.lower() != VECTOR_DATABASE:
        return None
    tables: list[str] = []
    for project in await svc.projects.list():
        tables += [kb.storage_table for kb in await svc.knowledge_bases.list(project.name)]
    return tables
