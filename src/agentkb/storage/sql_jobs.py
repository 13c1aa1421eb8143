"""MindsDB's JOBS (migration 0019_sql_jobs): scheduled SQL statements, their runs and their LAST values,
and the claim by which one process among any number runs each tick.

**Claims.** A job is due when `next_run_at <= now()` and no run of it is in progress. `claim` picks due jobs
`FOR UPDATE SKIP LOCKED`, takes the job's lease (a session-level advisory lock, `sqljob:<id>`, on the
connection the claimer holds for the run: PostgreSQL drops it when that connection ends) and, in the same
transaction, moves `next_run_at` to the job's next tick and opens a run row. Two processes polling at once
cannot both take a tick: the row lock serialises them, and the second finds the job running or no longer
due. A run whose heartbeat is stale and whose lease is free (its process died) is taken over: its run row is
closed as failed and the tick it served is run again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncConnection

_LEASE_KEY = "hashtextextended('sqljob:' || CAST({} AS text), 0)"
_JOB_COLUMNS = (
    "j.id, j.project_id, p.name AS project_name, j.name, j.query, j.if_query, j.start_at, j.end_at, "
    "j.schedule_str, j.next_run_at, j.run_projects, j.created_by, j.running_run_id, j.running_worker, "
    "j.heartbeat_at, j.created_at, j.updated_at, (SELECT coalesce(jsonb_object_agg(l.key, l.value), '{}') "
    "FROM sql_job_last l WHERE l.job_id = j.id) AS variables"
)
_RUN_COLUMNS = "id, job_id, project_name, job_name, tick_at, run_start, run_end, state, error, query, ingest_job_ids, worker"
CLAIM_CANDIDATES = 8


@dataclass(frozen=True, slots=True)
class SQLJobRow:
    id: int
    project_id: int
    project_name: str
    name: str
    query: str
    if_query: str | None
    start_at: datetime
    end_at: datetime | None
    schedule_str: str | None  # MindsDB's `every 2 hours`; None: the job runs once
    next_run_at: datetime | None  # None: no run is planned (a run-once job that is running)
    run_projects: list[str] | None  # the creator's project scope, which its runs act in (None: all)
    created_by: str | None
    running_run_id: int | None
    running_worker: str | None
    heartbeat_at: datetime | None
    created_at: datetime
    updated_at: datetime
    variables: dict[str, Any]  # the LAST values it keeps, by condition (MindsDB's VARIABLES)


@dataclass(frozen=True, slots=True)
class SQLJobRunRow:
    id: int
    job_id: int | None
    project_name: str
    job_name: str
    tick_at: datetime  # the tick this run serves
    run_start: datetime
    run_end: datetime | None
    state: str  # running, succeeded, failed, skipped (its IF found nothing), handed_back
    error: str | None
    query: str | None  # the statements run, as MindsDB's QUERY
    ingest_job_ids: list[str]  # the ingestion jobs its inserts ran as
    worker: str | None


def _job(r: RowMapping) -> SQLJobRow:
    return SQLJobRow(**{k: r[k] for k in SQLJobRow.__slots__})


def _run(r: RowMapping) -> SQLJobRunRow:
    return SQLJobRunRow(**{k: r[k] for k in SQLJobRunRow.__slots__})


async def _one_job(conn: AsyncConnection, where: str, params: dict[str, Any]) -> SQLJobRow | None:
    row = (
        (
            await conn.execute(
                text(
                    f"SELECT {_JOB_COLUMNS} FROM sql_jobs j JOIN projects p ON p.id = j.project_id WHERE {where}"
                ),
                params,
            )
        )
        .mappings()
        .first()
    )
    return _job(row) if row else None


async def create(
    conn: AsyncConnection,
    *,
    project_id: int,
    name: str,
    query: str,
    if_query: str | None,
    start_at: datetime,
    end_at: datetime | None,
    schedule_str: str | None,
    run_projects: list[str] | None,
    created_by: str | None,
) -> SQLJobRow | None:
    """The new job, or None when the project has one of that name already."""
    found = await conn.execute(
        text(
            "INSERT INTO sql_jobs (project_id, name, query, if_query, start_at, end_at, schedule_str, next_run_at, "
            "run_projects, created_by) VALUES (:project_id, :name, :query, :if_query, :start_at, :end_at, "
            ":schedule_str, :start_at, :run_projects, :created_by) ON CONFLICT (project_id, name) DO NOTHING "
            "RETURNING id"
        ),
        {
            "project_id": project_id,
            "name": name,
            "query": query,
            "if_query": if_query,
            "start_at": start_at,
            "end_at": end_at,
            "schedule_str": schedule_str,
            "run_projects": run_projects,
            "created_by": created_by,
        },
    )
    job_id = found.scalar_one_or_none()
    return None if job_id is None else await get_by_id(conn, job_id)


async def get(conn: AsyncConnection, project_id: int, name: str) -> SQLJobRow | None:
    return await _one_job(conn, "j.project_id = :p AND j.name = :n", {"p": project_id, "n": name})


async def get_by_id(conn: AsyncConnection, job_id: int) -> SQLJobRow | None:
    return await _one_job(conn, "j.id = :id", {"id": job_id})


async def list_jobs(conn: AsyncConnection, project_ids: list[int] | None) -> list[SQLJobRow]:
    """Every job of the given projects (None: of all), by project and name."""
    where = "" if project_ids is None else "WHERE j.project_id = ANY(:ids) "
    rows = await conn.execute(
        text(
            f"SELECT {_JOB_COLUMNS} FROM sql_jobs j JOIN projects p ON p.id = j.project_id {where}"
            "ORDER BY p.name, j.name"
        ),
        {"ids": project_ids},
    )
    return [_job(r) for r in rows.mappings()]


async def delete(conn: AsyncConnection, job_id: int) -> None:
    """Drop a job; its LAST values go with it, its run rows stay (their job_id becomes NULL)."""
    await conn.execute(text("DELETE FROM sql_jobs WHERE id = :id"), {"id": job_id})


async def run_now(conn: AsyncConnection, job_id: int) -> SQLJobRow | None:
    """Make the job due at once (its schedule goes on from there)."""
    await conn.execute(
        text("UPDATE sql_jobs SET next_run_at = now(), updated_at = now() WHERE id = :id"), {"id": job_id}
    )
    return await get_by_id(conn, job_id)


async def history(
    conn: AsyncConnection, projects: list[str] | None, name: str | None, limit: int, job_id: int | None = None
) -> list[SQLJobRunRow]:
    """Runs, newest first: of the given projects (None: all), of one job name when `name` is given (dropped
    jobs of that name included, as MindsDB's jobs_history), of one job when `job_id` is."""
    clauses = []
    if job_id is not None:
        clauses.append("job_id = :job_id")
    if projects is not None:
        clauses.append("project_name = ANY(:projects)")
    if name is not None:
        clauses.append("job_name = :name")
    where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
    rows = await conn.execute(
        text(f"SELECT {_RUN_COLUMNS} FROM sql_job_runs {where}ORDER BY id DESC LIMIT :limit"),
        {"projects": projects, "name": name, "limit": limit, "job_id": job_id},
    )
    return [_run(r) for r in rows.mappings()]


async def get_run(conn: AsyncConnection, run_id: int) -> SQLJobRunRow | None:
    row = (
        (await conn.execute(text(f"SELECT {_RUN_COLUMNS} FROM sql_job_runs WHERE id = :id"), {"id": run_id}))
        .mappings()
        .first()
    )
    return _run(row) if row else None


# --- the scheduler ----------------------------------------------------------------------------------------
NextTick = Callable[[SQLJobRow, datetime], datetime | None]


async def claim(
    conn: AsyncConnection, worker: str, stale_after_s: float, next_tick: NextTick
) -> tuple[SQLJobRow, SQLJobRunRow] | None:
    """Take one due job (or one whose run's process died) for `worker`: its lease stays taken on `conn` (a
    session lock) until that connection is released (`Database.leasing`). Call in a transaction.
    `next_tick(job, now)` plans its next run (None: none, the job ends after this run)."""
    candidates = await conn.execute(
        text(
            "SELECT id FROM sql_jobs WHERE (running_run_id IS NULL AND next_run_at <= now()) OR "
            "(running_run_id IS NOT NULL AND heartbeat_at < now() - make_interval(secs => :stale)) "
            "ORDER BY next_run_at NULLS FIRST FOR UPDATE SKIP LOCKED LIMIT :n"
        ),
        {"stale": stale_after_s, "n": CLAIM_CANDIDATES},
    )
    for (job_id,) in candidates.all():
        if not (
            await conn.execute(
                text(f"SELECT pg_try_advisory_lock({_LEASE_KEY.format(':id')})"), {"id": job_id}
            )
        ).scalar_one():
            continue  # a live process runs it (however late its heartbeat)
        job = await get_by_id(conn, job_id)
        assert job is not None
        now = (await conn.execute(text("SELECT now()"))).scalar_one()
        if job.running_run_id is not None:  # its process died: close that run, serve its tick again
            tick = await conn.execute(
                text(
                    "UPDATE sql_job_runs SET state = 'failed', run_end = now(), error = "
                    "'interrupted: the process running it stopped; the tick is run again' "
                    "WHERE id = :id RETURNING tick_at"
                ),
                {"id": job.running_run_id},
            )
            tick_at = tick.scalar_one_or_none() or now
            next_run_at = job.next_run_at
        else:
            assert job.next_run_at is not None
            tick_at = job.next_run_at
            next_run_at = next_tick(job, now)
        run_id = (
            await conn.execute(
                text(
                    "INSERT INTO sql_job_runs (job_id, project_name, job_name, tick_at, worker) "
                    "VALUES (:job, :project, :name, :tick, :worker) RETURNING id"
                ),
                {
                    "job": job.id,
                    "project": job.project_name,
                    "name": job.name,
                    "tick": tick_at,
                    "worker": worker,
                },
            )
        ).scalar_one()
        await conn.execute(
            text(
                "UPDATE sql_jobs SET next_run_at = :next, running_run_id = :run, running_worker = :worker, "
                "heartbeat_at = now(), updated_at = now() WHERE id = :id"
            ),
            {"next": next_run_at, "run": run_id, "worker": worker, "id": job.id},
        )
        claimed = await get_by_id(conn, job.id)
        run = await get_run(conn, run_id)
        assert claimed is not None and run is not None
        return claimed, run
    return None


async def previous_tick(conn: AsyncConnection, job_id: int, run_id: int) -> datetime | None:
    """The tick the job's run before `run_id` served (MindsDB's PREVIOUS_START_DATETIME)."""
    found = await conn.execute(
        text("SELECT tick_at FROM sql_job_runs WHERE job_id = :job AND id < :run ORDER BY id DESC LIMIT 1"),
        {"job": job_id, "run": run_id},
    )
    value: datetime | None = found.scalar_one_or_none()
    return value


async def heartbeat(conn: AsyncConnection, job_id: int, run_id: int) -> bool:
    """Record that the run is alive; False when the job is no longer running this run (dropped, taken over)."""
    found = await conn.execute(
        text(
            "UPDATE sql_jobs SET heartbeat_at = now() WHERE id = :id AND running_run_id = :run RETURNING id"
        ),
        {"id": job_id, "run": run_id},
    )
    return found.first() is not None


async def finish(
    conn: AsyncConnection,
    run_id: int,
    state: str,
    error: str | None,
    query: str | None,
    ingest_job_ids: list[str],
) -> None:
    """Close a run and free its job; a job with no next run (run once, or past its END) is removed, as
    MindsDB removes it: its runs stay in the history."""
    await conn.execute(
        text(
            "UPDATE sql_job_runs SET state = :state, error = :error, query = :query, "
            "ingest_job_ids = :ingest, run_end = now() WHERE id = :id"
        ),
        {"state": state, "error": error, "query": query, "ingest": ingest_job_ids, "id": run_id},
    )
    await conn.execute(
        text(
            "UPDATE sql_jobs SET running_run_id = NULL, running_worker = NULL, heartbeat_at = NULL, "
            "updated_at = now() WHERE running_run_id = :id"
        ),
        {"id": run_id},
    )
    await conn.execute(
        text(
            "DELETE FROM sql_jobs WHERE running_run_id IS NULL AND next_run_at IS NULL AND id = "
            "(SELECT job_id FROM sql_job_runs WHERE id = :id)"
        ),
        {"id": run_id},
    )


async def hand_back(conn: AsyncConnection, worker: str) -> int:
    """On shutdown: this worker's interrupted runs are closed as handed back and their jobs made due again
    at the tick they served, so the next process runs it. Returns how many."""
    result = await conn.execute(
        text(
            "WITH runs AS (UPDATE sql_job_runs SET state = 'handed_back', run_end = now(), error = "
            "'interrupted: the server stopped; the run was handed back and runs again' "
            "WHERE worker = :w AND state = 'running' RETURNING id, tick_at) "
            "UPDATE sql_jobs j SET running_run_id = NULL, running_worker = NULL, heartbeat_at = NULL, "
            "next_run_at = LEAST(coalesce(j.next_run_at, runs.tick_at), runs.tick_at), updated_at = now() "
            "FROM runs WHERE j.running_run_id = runs.id RETURNING j.id"
        ),
        {"w": worker},
    )
    return len(result.all())


async def next_due_in(conn: AsyncConnection) -> float | None:
    """Seconds until the earliest planned run (negative: overdue); None when no job is planned."""
    found = await conn.execute(
        text("SELECT extract(epoch FROM min(next_run_at) - now()) FROM sql_jobs WHERE running_run_id IS NULL")
    )
    value = found.scalar_one_or_none()
    return None if value is None else float(value)


# --- LAST ----------------------------------------------------------------------------------------------
async def last_values(conn: AsyncConnection, job_id: int) -> dict[str, Any]:
    rows = await conn.execute(text("SELECT key, value FROM sql_job_last WHERE job_id = :id"), {"id": job_id})
    return {key: value for key, value in rows.all()}


async def save_last_values(conn: AsyncConnection, job_id: int, values: dict[str, Any]) -> None:
    for key, value in values.items():
        await conn.execute(
            text(
                "INSERT INTO sql_job_last (job_id, key, value) VALUES (:id, :key, CAST(:value AS jsonb)) "
                "ON CONFLICT (job_id, key) DO UPDATE SET value = excluded.value, updated_at = now()"
            ),
            {"id": job_id, "key": key, "value": orjson.dumps(value, default=str).decode()},
        )
