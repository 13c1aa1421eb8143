"""What `/metrics` reads from the database at scrape time: ingestion jobs by state, how far scheduled jobs
are behind, and the pool's use."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

JOB_STATES = ("queued", "running", "succeeded", "failed", "cancelled")


async def job_counts(conn: AsyncConnection) -> dict[str, int]:
    """Jobs by state; every known state is present (0 when none)."""
    rows = await conn.execute(text("SELECT state, count(*) AS n FROM ingest_jobs GROUP BY state"))
    counts = dict.fromkeys(JOB_STATES, 0)
    counts.update({str(state): int(n) for state, n in rows})
    return counts


async def sql_jobs_behind_s(conn: AsyncConnection) -> float:
    """Seconds the most overdue scheduled job not yet started is behind its tick (0 when none is)."""
    found = await conn.execute(
        text(
            "SELECT coalesce(extract(epoch FROM now() - min(next_run_at)), 0) FROM sql_jobs "
            "WHERE running_run_id IS NULL AND next_run_at < now()"
        )
    )
    return max(float(found.scalar_one()), 0.0)


def pool_use(engine: AsyncEngine) -> tuple[int, int, int]:
    """(checked out, idle, the most connections the pool opens) of the engine's QueuePool; zeros for a
    pool without those counts (NullPool)."""
    pool = engine.sync_engine.pool
    size = getattr(pool, "size", None)
    checked_out = getattr(pool, "checkedout", None)
    idle = getattr(pool, "checkedin", None)
    overflow = getattr(pool, "_max_overflow", 0)
    if not (callable(size) and callable(checked_out) and callable(idle)):
        return 0, 0, 0
    return int(checked_out()), int(idle()), int(size()) + max(int(overflow), 0)
