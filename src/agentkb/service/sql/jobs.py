"""MindsDB's JOBS on the SQL endpoint: `CREATE JOB`, `DROP JOB`, `SHOW JOBS`, and the tables `jobs` and
`jobs_history` of a project, `information_schema.jobs` and `log.jobs_history` (every visible project).

Columns are MindsDB's: jobs NAME, PROJECT, START_AT, END_AT, NEXT_RUN_AT, SCHEDULE_STR, QUERY, IF_QUERY,
VARIABLES (the LAST values the job keeps); jobs_history NAME, PROJECT, RUN_START, RUN_END, ERROR, QUERY,
then agentkb's TICK_AT (the tick the run served: MindsDB's RUN_START), STATE and INGEST_JOBS (the
ingestion jobs its inserts ran as).
"""

from __future__ import annotations

from typing import Any

from mindsdb_sql_parser import ast
from mindsdb_sql_parser.ast import mindsdb

from agentkb.service.catalog.sql_jobs import JobInput
from agentkb.service.sql.context import SQLContext
from agentkb.service.sql.result import Result, ok, table
from agentkb.sql import catalog
from agentkb.sql.names import two_part

PROJECT_TABLES = ("jobs", "jobs_history")


async def create_job(ctx: SQLContext, statement: mindsdb.CreateJob, db: str, params: Any) -> Result:
    project, name = two_part(statement.name, db)
    given = JobInput(
        name=name,
        query=statement.query_str,
        start=statement.start_str,
        end=statement.end_str,
        every=statement.repeat_str,
        if_query=statement.if_query_str,
    )
    await ctx.sql_jobs.create(project, given, if_not_exists=bool(statement.if_not_exists))
    return ok()


async def drop_job(ctx: SQLContext, statement: mindsdb.DropJob, db: str, params: Any) -> Result:
    project, name = two_part(statement.name, db)
    await ctx.sql_jobs.drop(project, name, if_exists=bool(statement.if_exists))
    return ok()


async def history_table(ctx: SQLContext, select: ast.Select, db: str) -> Result:
    """`SELECT ... FROM log.jobs_history`: every visible project's runs."""
    rows = await ctx.job_history_rows(None)
    names, data = catalog.select_rows(select, catalog.JOB_HISTORY_COLUMNS, rows)
    return table(names, data, db=db)


async def project_table(
    ctx: SQLContext, select: ast.Select, project: str | None, name: str, db: str
) -> Result:
    """`SELECT ... FROM [<project>.]jobs | jobs_history`."""
    if name == "jobs":
        rows, columns = await ctx.job_rows(project), catalog.JOB_COLUMNS
    else:
        rows, columns = await ctx.job_history_rows(project), catalog.JOB_HISTORY_COLUMNS
    names, data = catalog.select_rows(select, columns, rows)
    return table(names, data, db=db)
