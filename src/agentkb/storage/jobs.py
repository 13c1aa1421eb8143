"""Ingestion-job rows, and the queue operations workers use (claims with FOR UPDATE SKIP LOCKED).

**Leases.** The process running a job holds a session-level advisory lock on it (`job:<id>`) on a connection
of its own for as long as it runs it. PostgreSQL drops that lock the moment the process's connection ends
(the process died, its host is gone), so "the lock is free" means "nobody runs this job": a running async
job is taken over only when its heartbeat is stale *and* its lease is free. (A synchronous insert takes no
lease, which would cost each insert request a second connection: it is failed once its heartbeat is stale.) A live worker,
however slow, never loses its job; a dead one's job is taken over as soon as its heartbeat is stale. The
progress, heartbeat and outcome updates of a job also name their worker, so a process that lost its job
(its lease connection broke) records nothing more of it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncConnection

TERMINAL = ("succeeded", "failed", "cancelled")
_COLUMNS = (
    "id, project_id, kb_id, mode, state, request, counts, errors, error, worker, attempts, "
    "cancel_requested, created_at, started_at, finished_at, heartbeat_at, updated_at, query_id, sql, "
    "sql_database, context, query_removed"
)


@dataclass(frozen=True, slots=True)
class JobRow:
    id: str
    project_id: int
    kb_id: int
    mode: str
    state: str
    request: dict[str, Any]
    counts: dict[str, Any]
    errors: list[dict[str, Any]]
    error: str | None
    worker: str | None
    attempts: int
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None
    updated_at: datetime
    query_id: int  # MindsDB's integer query id (`information_schema.queries`)
    sql: str | None  # the INSERT statement, for a job an SQL statement started
    sql_database: str | None  # the database that statement ran in
    context: dict[str, Any]  # a partitioned insert's progress: the last track value stored
    query_removed: bool  # `query_cancel` took it off `information_schema.queries`


def _row(r: RowMapping) -> JobRow:
    return JobRow(**{k: r[k] for k in JobRow.__slots__})


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


async def create(
    conn: AsyncConnection,
    *,
    job_id: str,
    project_id: int,
    kb_id: int,
    mode: str,
    request: dict[str, Any],
    worker: str | None,
    sql: str | None = None,
    sql_database: str | None = None,
) -> JobRow:
    running = mode == "sync"
    row = (
        (
            await conn.execute(
                text(
                    f"INSERT INTO ingest_jobs (id, project_id, kb_id, mode, state, request, worker, attempts, started_at, "
                    "heartbeat_at, sql, sql_database) VALUES (:id, :project_id, :kb_id, :mode, :state, "
                    f"CAST(:request AS jsonb), :worker, :attempts, {'now()' if running else 'NULL'}, "
                    f"{'now()' if running else 'NULL'}, :sql, :sql_database) RETURNING {_COLUMNS}"
                ),
                {
                    "id": job_id,
                    "project_id": project_id,
                    "kb_id": kb_id,
                    "mode": mode,
                    "state": "running" if running else "queued",
                    "request": _json(request),
                    "worker": worker,
                    "attempts": 1 if running else 0,
                    "sql": sql,
                    "sql_database": sql_database,
                },
            )
        )
        .mappings()
        .one()
    )
    return _row(row)


async def get(conn: AsyncConnection, job_id: str) -> JobRow | None:
    row = (
        await conn.execute(text(f"SELECT {_COLUMNS} FROM ingest_jobs WHERE id = :id"), {"id": job_id})
    ).mappings()
    found = row.first()
    return _row(found) if found else None


async def list_for_kb(conn: AsyncConnection, kb_id: int, limit: int) -> list[JobRow]:
    rows = await conn.execute(
        text(f"SELECT {_COLUMNS} FROM ingest_jobs WHERE kb_id = :kb ORDER BY created_at DESC LIMIT :limit"),
        {"kb": kb_id, "limit": limit},
    )
    return [_row(r) for r in rows.mappings()]


_OWNED = "id = :id AND state = 'running' AND worker IS NOT DISTINCT FROM :worker"
_LEASE_KEY = "hashtextextended('job:' || {}, 0)"


async def progress(
    conn: AsyncConnection,
    job_id: str,
    counts: dict[str, Any],
    errors: list[dict[str, Any]],
    worker: str | None = None,
) -> bool | None:
    """Record progress and beat the heart; True if a cancel was requested, None if `worker` no longer runs
    the job (it was taken over or ended)."""
    row = (
        await conn.execute(
            text(
                "UPDATE ingest_jobs SET counts = CAST(:counts AS jsonb), errors = CAST(:errors AS jsonb), "
                f"heartbeat_at = now(), updated_at = now() WHERE {_OWNED} RETURNING cancel_requested"
            ),
            {"id": job_id, "counts": _json(counts), "errors": _json(errors), "worker": worker},
        )
    ).first()
    return None if row is None else bool(row.cancel_requested)


async def heartbeat(conn: AsyncConnection, job_id: str, worker: str | None = None) -> bool | None:
    """True if a cancel was requested, None if `worker` no longer runs the job."""
    row = (
        await conn.execute(
            text(f"UPDATE ingest_jobs SET heartbeat_at = now() WHERE {_OWNED} RETURNING cancel_requested"),
            {"id": job_id, "worker": worker},
        )
    ).first()
    return None if row is None else bool(row.cancel_requested)


async def finish(
    conn: AsyncConnection,
    job_id: str,
    state: str,
    counts: dict[str, Any],
    errors: list[dict[str, Any]],
    error: str | None,
    worker: str | None = None,
) -> JobRow | None:
    """Record how the job ended, if `worker` still runs it; the job as recorded (None: it was taken over, or
    ended already)."""
    result = await conn.execute(
        text(
            "UPDATE ingest_jobs SET state = :state, counts = CAST(:counts AS jsonb), errors = CAST(:errors AS jsonb), "
            f"error = :error, finished_at = now(), updated_at = now() WHERE {_OWNED} RETURNING {_COLUMNS}"
        ),
        {
            "id": job_id,
            "state": state,
            "counts": _json(counts),
            "errors": _json(errors),
            "error": error,
            "worker": worker,
        },
    )
    row = result.mappings().first()
    return None if row is None else _row(row)


async def take_lease(conn: AsyncConnection, job_id: str) -> bool:
    """Take the job's lease on `conn` (a session-level lock: it outlives the transaction); False if another
    session holds it."""
    found = await conn.execute(
        text(f"SELECT pg_try_advisory_lock({_LEASE_KEY.format(':id')})"), {"id": job_id}
    )
    return bool(found.scalar_one())


async def request_cancel(conn: AsyncConnection, job_id: str) -> JobRow | None:
    """Queued jobs are cancelled at once; running ones are flagged and stop at their next check."""
    row = (
        (
            await conn.execute(
                text(
                    "UPDATE ingest_jobs SET cancel_requested = (state = 'running'), "
                    "state = CASE WHEN state = 'queued' THEN 'cancelled' ELSE state END, "
                    "finished_at = CASE WHEN state = 'queued' THEN now() ELSE finished_at END, updated_at = now() "
                    f"WHERE id = :id RETURNING {_COLUMNS}"
                ),
                {"id": job_id},
            )
        )
        .mappings()
        .first()
    )
    return _row(row) if row else None


CLAIM_CANDIDATES = 8


async def claim(conn: AsyncConnection, worker: str, stale_after_s: float) -> JobRow | None:
    """Take the oldest queued async job, or a running one whose heartbeat is stale and whose lease is free
    (its worker is gone), for `worker`. Call it in a transaction on the connection that is to hold the
    lease: the returned job's lease stays taken on `conn` until the connection is released (`Database.leasing`)."""
    candidates = await conn.execute(
        text(
            "SELECT id FROM ingest_jobs WHERE mode = 'async' AND (state = 'queued' OR (state = 'running' "
            "AND heartbeat_at < now() - make_interval(secs => :stale))) "
            "ORDER BY created_at FOR UPDATE SKIP LOCKED LIMIT :n"
        ),
        {"stale": stale_after_s, "n": CLAIM_CANDIDATES},
    )
    for (job_id,) in candidates.all():
        if not await take_lease(conn, job_id):
            continue  # its worker is alive (however late its heartbeat)
        row = (
            (
                await conn.execute(
                    text(
                        "UPDATE ingest_jobs SET state = 'running', worker = :worker, attempts = attempts + 1, "
                        "started_at = coalesce(started_at, now()), heartbeat_at = now(), updated_at = now() "
                        f"WHERE id = :id RETURNING {_COLUMNS}"
                    ),
                    {"worker": worker, "id": job_id},
                )
            )
            .mappings()
            .one()
        )
        return _row(row)
    return None


async def fail_abandoned_sync(conn: AsyncConnection, stale_after_s: float) -> int:
    """Synchronous inserts whose server died (stale heartbeat, free lease): their transaction rolled back,
    so say so and end them."""
    result = await conn.execute(
        text(
            "WITH stale AS MATERIALIZED (SELECT id FROM ingest_jobs WHERE mode = 'sync' AND state = 'running' "
            "AND heartbeat_at < now() - make_interval(secs => :stale) FOR UPDATE SKIP LOCKED) "
            "UPDATE ingest_jobs SET state = 'failed', finished_at = now(), updated_at = now(), error = "
            "'interrupted: the server stopped while this insert was running; nothing of it was stored' "
            f"WHERE id IN (SELECT id FROM stale WHERE pg_try_advisory_xact_lock({_LEASE_KEY.format('id')})) "
            "RETURNING id"
        ),
        {"stale": stale_after_s},
    )
    return len(result.all())


async def hand_back(conn: AsyncConnection, worker: str) -> int:
    """Put this worker's running async jobs back in the queue (without counting the attempt)."""
    result = await conn.execute(
        text(
            "UPDATE ingest_jobs SET state = 'queued', worker = NULL, attempts = greatest(attempts - 1, 0), "
            "updated_at = now() WHERE worker = :w AND state = 'running' AND mode = 'async' RETURNING id"
        ),
        {"w": worker},
    )
    return len(result.all())


async def release(conn: AsyncConnection, worker: str) -> None:
    """On a clean shutdown: hand this worker's async jobs back to the queue, end its sync ones."""
    await hand_back(conn, worker)
    await conn.execute(
        text(
            "UPDATE ingest_jobs SET state = 'failed', finished_at = now(), updated_at = now(), error = "
            "'interrupted: the server stopped while this insert was running; nothing of it was stored' "
            "WHERE worker = :w AND state = 'running' AND mode = 'sync'"
        ),
        {"w": worker},
    )


# --- jobs as MindsDB's queries (`information_schema.queries`, `query_cancel`, DESCRIBE KNOWLEDGE_BASE) --------


async def forget_old_queries(conn: AsyncConnection) -> None:
    """MindsDB's purge on each new query: queries that finished more than a day ago leave the list."""
    await conn.execute(
        text(
            "UPDATE ingest_jobs SET query_removed = true WHERE sql IS NOT NULL AND NOT query_removed "
            "AND state = 'succeeded' AND finished_at < now() - interval '1 day'"
        )
    )


async def list_queries(conn: AsyncConnection) -> list[JobRow]:
    """Jobs started by SQL statements, still listed (not removed by `query_cancel`), oldest first."""
    rows = await conn.execute(
        text(
            f"SELECT {_COLUMNS} FROM ingest_jobs WHERE sql IS NOT NULL AND NOT query_removed ORDER BY query_id"
        )
    )
    return [_row(r) for r in rows.mappings()]


async def get_query(conn: AsyncConnection, query_id: int) -> JobRow | None:
    row = (
        (
            await conn.execute(
                text(
                    f"SELECT {_COLUMNS} FROM ingest_jobs WHERE query_id = :q AND sql IS NOT NULL "
                    "AND NOT query_removed"
                ),
                {"q": query_id},
            )
        )
        .mappings()
        .first()
    )
    return _row(row) if row else None


async def last_queries(conn: AsyncConnection, kb_ids: list[int]) -> dict[int, JobRow]:
    """Each knowledge base's latest job started by an SQL statement (removed ones included)."""
    rows = await conn.execute(
        text(
            f"SELECT DISTINCT ON (kb_id) {_COLUMNS} FROM ingest_jobs WHERE sql IS NOT NULL AND kb_id = ANY(:ids) "
            "ORDER BY kb_id, created_at DESC"
        ),
        {"ids": kb_ids},
    )
    return {r["kb_id"]: _row(r) for r in rows.mappings()}


async def remove_query(conn: AsyncConnection, query_id: int) -> JobRow | None:
    """`query_cancel`: take the query off the list and cancel its job (a queued one at once, a running one
    at its next check)."""
    row = (
        (
            await conn.execute(
                text(
                    "UPDATE ingest_jobs SET query_removed = true, cancel_requested = cancel_requested OR "
                    "(state = 'running'), state = CASE WHEN state = 'queued' THEN 'cancelled' ELSE state END, "
                    "finished_at = CASE WHEN state = 'queued' THEN now() ELSE finished_at END, "
                    "error = CASE WHEN state = 'queued' THEN 'cancelled on request' ELSE error END, "
                    "updated_at = now() WHERE query_id = :q AND sql IS NOT NULL AND NOT query_removed "
                    f"RETURNING {_COLUMNS}"
                ),
                {"q": query_id},
            )
        )
        .mappings()
        .first()
    )
    return _row(row) if row else None


async def requeue(conn: AsyncConnection, job_id: str) -> JobRow | None:
    """`query_resume`: queue a failed job again, for a worker (a partitioned insert goes on after the last
    track value it stored)."""
    row = (
        (
            await conn.execute(
                text(
                    "UPDATE ingest_jobs SET mode = 'async', state = 'queued', worker = NULL, attempts = 0, "
                    "error = NULL, finished_at = NULL, cancel_requested = false, updated_at = now() "
                    f"WHERE id = :id AND state = 'failed' RETURNING {_COLUMNS}"
                ),
                {"id": job_id},
            )
        )
        .mappings()
        .first()
    )
    return _row(row) if row else None


async def save_partition(
    conn: AsyncConnection, job_id: str, counts: dict[str, Any], context: dict[str, Any]
) -> bool:
    """Record a partition's progress in the partition's own transaction; True if a cancel was requested."""
    row = (
        await conn.execute(
            text(
                "UPDATE ingest_jobs SET counts = CAST(:counts AS jsonb), context = CAST(:context AS jsonb), "
                "heartbeat_at = now(), updated_at = now() WHERE id = :id RETURNING cancel_requested"
            ),
            {"id": job_id, "counts": _json(counts), "context": _json(context)},
        )
    ).first()
    return bool(row and row.cancel_requested)
