"""MindsDB's JOBS as records: create (the statements checked, the schedule read), drop, list, one, history,
and "run now". The scheduler (`service.scheduler`) runs them.

A job runs with the scope of whoever created it: a project key's job acts in that key's projects only, as
its creator would (a read-only key creates none). `changed` is set when a job is created or asked to run
now, so this process's scheduler looks at once instead of at its next poll.
"""

from __future__ import annotations

import asyncio
import builtins
from dataclasses import dataclass
from datetime import UTC, datetime

from mindsdb_sql_parser import parse_sql

from agentkb.errors import BadRequest, Conflict, NotFound
from agentkb.secrecy import mask_text
from agentkb.service.catalog.projects import resolve
from agentkb.service.platform import access
from agentkb.sql import last, schedule
from agentkb.storage import sql_jobs
from agentkb.storage.db import Database
from agentkb.storage.sql_jobs import SQLJobRow, SQLJobRunRow
from agentkb.validation import check_name

MAX_HISTORY = 1000


@dataclass(frozen=True, slots=True)
class JobInput:
    """A job as CREATE JOB or the REST POST gives it (dates as text, MindsDB's formats)."""

    name: str
    query: str
    start: str | None = None
    end: str | None = None
    every: str | None = None  # `2 hours`, `every 2 hours`, `hour`
    if_query: str | None = None


def job_not_found(name: str) -> NotFound:
    return NotFound(f"Job with name {name} does not exist", title="Job not found")


def _check_statements(text: str, what: str) -> None:
    """Each statement must parse (template variables blanked), as MindsDB checks at CREATE JOB; and none may
    carry a secret: a job's text is stored and shown as it is (`jobs.QUERY`), so a password or API key in it
    would be kept in clear."""
    if mask_text(text) != text:
        raise BadRequest(
            f"The job's {what} carries a secret (a password, API key or token), and a job's statements are "
            "stored and shown as written: create the data source, knowledge base or agent once, outside the "
            "job, and name it in the job",
            title="Invalid job",
        )
    for sql in schedule.split_statements(text):
        try:
            statement = parse_sql(schedule.without_variables(sql))
        except Exception as exc:  # the parser raises many kinds of errors
            raise BadRequest(f"Unable to parse the job's {what}: {sql}: {exc}", title="Invalid job") from exc
        last.check_not_mirrored(statement)


class SQLJobCatalog:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.changed = asyncio.Event()

    async def create(self, project_name: str, given: JobInput, *, if_not_exists: bool = False) -> SQLJobRow:
        access.require_write("creating a job")
        access.require_project(project_name)
        name = check_name(given.name, "job name").lower()
        if not isinstance(given.query, str) or not given.query.strip():
            raise BadRequest("A job needs its statements: 'query'", title="Invalid job")
        _check_statements(given.query, "statement")
        if given.if_query is not None:
            _check_statements(given.if_query, "IF condition")
        now = datetime.now(UTC)
        start = schedule.parse_date(given.start, "START") if given.start else now
        start = max(start, now)  # as MindsDB: a START in the past means now
        every = schedule.parse_every(given.every) if given.every else None
        end = schedule.parse_date(given.end, "END") if given.end and every is not None else None
        if end is not None and end < start:
            raise BadRequest(f"The job's END ({given.end}) is before its START", title="Invalid job")
        principal = access.current()
        async with self.db.transaction() as conn:
            project = await resolve(conn, project_name)
            row = await sql_jobs.create(
                conn,
                project_id=project.id,
                name=name,
                query=given.query.strip(),
                if_query=given.if_query.strip() if given.if_query else None,
                start_at=start,
                end_at=end,
                schedule_str=every.text if every else None,
                run_projects=sorted(principal.projects)
                if principal and principal.projects is not None
                else None,
                created_by=principal.id if principal else None,
            )
            if row is None:
                existing = await sql_jobs.get(conn, project.id, name)
                if if_not_exists and existing is not None:
                    return existing
                raise Conflict(f"Job {name} already exists in project {project.name}", title="Job exists")
        self.changed.set()
        return row

    async def drop(self, project_name: str, name: str, *, if_exists: bool = False) -> None:
        """A running run of it ends at its next heartbeat."""
        access.require_write("dropping a job")
        access.require_project(project_name)
        async with self.db.transaction() as conn:
            project = await resolve(conn, project_name)
            job = await sql_jobs.get(conn, project.id, name.lower())
            if job is None:
                if if_exists:
                    return
                raise job_not_found(name)
            await sql_jobs.delete(conn, job.id)

    async def get(self, project_name: str, name: str) -> SQLJobRow:
        access.require_project(project_name)
        async with self.db.read() as conn:
            project = await resolve(conn, project_name)
            job = await sql_jobs.get(conn, project.id, name.lower())
        if job is None:
            raise job_not_found(name)
        return job

    async def list(self, project_name: str | None = None) -> list[SQLJobRow]:
        """The jobs of one project, or of every project the caller may see."""
        async with self.db.read() as conn:
            if project_name is not None:
                access.require_project(project_name)
                project = await resolve(conn, project_name)
                return await sql_jobs.list_jobs(conn, [project.id])
            rows = await sql_jobs.list_jobs(conn, None)
        return [row for row in rows if access.allowed(row.project_name)]

    async def history(
        self, project_name: str | None, name: str | None = None, limit: int = MAX_HISTORY
    ) -> builtins.list[SQLJobRunRow]:
        """Runs, newest first (MindsDB's `jobs_history`): of one project or every visible one; of one job
        name, which may have been dropped since."""
        async with self.db.read() as conn:
            if project_name is not None:
                access.require_project(project_name)
                projects = [(await resolve(conn, project_name)).name]
            else:
                projects = None
            rows = await sql_jobs.history(conn, projects, name.lower() if name else None, limit)
        return [row for row in rows if access.allowed(row.project_name)]

    async def runs(
        self, project_name: str, name: str, limit: int = MAX_HISTORY
    ) -> builtins.list[SQLJobRunRow]:
        """The runs of the job named so now (not of an earlier, dropped job of the same name), newest first."""
        job = await self.get(project_name, name)
        async with self.db.read() as conn:
            return await sql_jobs.history(conn, None, None, limit, job_id=job.id)

    async def run_now(self, project_name: str, name: str) -> SQLJobRow:
        """Make the job due now (a job already running runs again once that run ends)."""
        access.require_write("running a job")
        job = await self.get(project_name, name)
        async with self.db.transaction() as conn:
            found = await sql_jobs.run_now(conn, job.id)
        if found is None:
            raise job_not_found(name)
        self.changed.set()
        return found
