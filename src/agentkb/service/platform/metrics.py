"""`GET /metrics`: refresh the gauges read at scrape time (jobs by state, the pool, pending index merges),
then render."""

from __future__ import annotations

import logging
from collections.abc import Callable

from agentkb import metrics
from agentkb.storage import metrics as store
from agentkb.storage.db import Database

log = logging.getLogger("agentkb.metrics")


class MetricsService:
    def __init__(self, db: Database, merges_pending: Callable[[], int] = lambda: 0) -> None:
        """`merges_pending`: how many chunk tables' index merges this process has scheduled or running."""
        self.db = db
        self.merges_pending = merges_pending

    async def exposition(self) -> bytes:
        """The Prometheus text format. A database that does not answer leaves the job gauges as they
        were (the scrape still succeeds: the request metrics matter most when PostgreSQL is down)."""
        checked_out, idle, most = store.pool_use(self.db.engine)
        parked = min(self.db.parked, checked_out)  # kept between reads (Database.read): idle, not in use
        checked_out, idle = checked_out - parked, idle + parked
        metrics.db_pool_connections.labels("checked_out").set(checked_out)
        metrics.db_pool_connections.labels("idle").set(idle)
        metrics.db_pool_size.set(most)
        metrics.vector_index_merges_pending.set(self.merges_pending())
        try:
            async with self.db.connect() as conn:
                counts = await store.job_counts(conn)
                behind = await store.sql_jobs_behind_s(conn)
        except Exception as exc:  # a scrape must not fail because PostgreSQL is away
            log.warning("metrics: could not count jobs: %s", exc)
        else:
            for state, n in counts.items():
                metrics.jobs.labels(state).set(n)
            metrics.sql_job_behind.set(behind)
        return metrics.render()
