"""`SHOW DATABASES | SCHEMAS | KNOWLEDGE_BASES | AGENTS | PROJECTS | JOBS | [FULL] TABLES [FROM …] [LIKE …] [WHERE …]`."""

from __future__ import annotations

import asyncio
from typing import Any

import sqlalchemy
from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest
from agentkb.service.ingest.query_sources import FILES
from agentkb.service.sql.context import SQLContext
from agentkb.service.sql.result import Result, table
from agentkb.sql import catalog


async def show(ctx: SQLContext, show: ast.Show, db: str, params: Any) -> Result:
    category = show.category.upper().replace(" ", "_")
    if category in ("DATABASES", "SCHEMAS"):
        # As MindsDB: information_schema.databases' NAME as `Database`; FULL adds TYPE and ENGINE (the
        # JavaScript SDK's getAllDatabases reads them). WHERE may name any of those columns.
        rows = [{"Database": r["NAME"], **r} for r in await ctx.database_rows()]
        columns = ["Database", "TYPE", "ENGINE"] if "FULL" in (show.modes or []) else ["Database"]
    elif category == "KNOWLEDGE_BASES":
        rows, columns = await ctx.kb_rows(db), catalog.KB_COLUMNS
    elif category == "AGENTS":
        rows, columns = await ctx.agent_rows(db), catalog.AGENT_COLUMNS
    elif category in ("TABLES", "FULL_TABLES"):
        return await _show_tables(ctx, show, db)
    elif category == "JOBS":  # every visible project's; `WHERE project = ...` narrows it
        rows, columns = await ctx.job_rows(None), catalog.JOB_COLUMNS
    elif category == "PROJECTS":
        rows, columns = [{"NAME": p.name} for p in await ctx.projects.list()], ["NAME"]
    else:
        raise BadRequest(f"Unsupported statement: SHOW {show.category}")
    if show.like is not None:
        rows = [r for r in rows if catalog.like(next(iter(r.values())), show.like)]
    rows = [r for r in rows if catalog.matches(show.where, r)]
    return table(columns, [[r[c] for c in columns] for r in rows], db=db)


async def _show_tables(ctx: SQLContext, show: ast.Show, db: str) -> Result:
    source = str(show.from_table.parts[-1]) if show.from_table is not None else db
    if source.lower() == FILES:
        names = [f.name for f in await ctx.files.list()]
    elif (vector_tables := await ctx.vector_tables(source)) is not None:
        names = vector_tables
    elif await ctx.is_project(source):
        project = source.lower()
        names = [kb.name for kb in await ctx.knowledge_bases.list(project)]
        names += [a.name for a in await ctx.agents.list(project)]
    else:
        engine, _ = await ctx.data_sources.engine_for(source)
        names = await asyncio.to_thread(lambda: sorted(sqlalchemy.inspect(engine).get_table_names()))
    if show.like is not None:
        names = [n for n in names if catalog.like(n, show.like)]
    return table([f"Tables_in_{source}"], [[n] for n in names], db=db)
