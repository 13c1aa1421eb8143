"""The ingestion worker: claims queued jobs from PostgreSQL (`FOR UPDATE SKIP LOCKED`) and runs them.

The API server runs one in-process; `agentkb worker` runs more, on any machine that reaches the same
database. A job whose worker stops beating (crash, kill) is claimed again after `stale_after_s` and
re-run — inserts are idempotent upserts inside one transaction, so a re-run finishes the work without
duplicating it — up to `MAX_ATTEMPTS` times, then it fails with the reason. Synchronous inserts whose
server died are marked failed (their transaction rolled back: nothing of them is visible).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from agentkb.service.ingest import IngestService
from agentkb.storage import jobs
from agentkb.storage.db import Database

log = logging.getLogger("agentkb.worker")
MAX_ATTEMPTS = 3


class JobWorker:
    def __init__(self, ingest: IngestService, db: Database, *, poll_s: float = 1.0, stale_after_s: float = 30.0) -> None:
        self.ingest = ingest
        self.db = db
        self.poll_s = poll_s
        self.stale_after_s = stale_after_s
        self.jobs_run = 0

    async def run_once(self) -> bool:
        """Claim and run one job; False when there was none."""
        async with self.db.transaction() as conn:
            swept = await jobs.fail_abandoned_sync(conn, self.stale_after_s)
            job = await jobs.claim(conn, self.ingest.worker_id, self.stale_after_s)
        if swept:
            log.warning("marked %d interrupted synchronous insert(s) failed", swept)
        if job is None:
            return False
        if job.attempts > MAX_ATTEMPTS:
            async with self.db.transaction() as conn:
                await jobs.finish(conn, job.id, "failed", job.counts, job.errors,
                                  f"gave up after {MAX_ATTEMPTS} attempts: its worker stopped each time")
            return True
        log.info("worker %s runs job %s (attempt %d)", self.ingest.worker_id, job.id, job.attempts)
        try:
            await self.ingest.run_job(job)
        except Exception:  # noqa: BLE001 - run_job has recorded it on the job
            log.info("job %s ended with an error", job.id)
        self.jobs_run += 1
        return True

    async def run(self) -> None:
        """Work until cancelled."""
        while True:
            try:
                if await self.run_once():
                    continue
            except asyncio.CancelledError:
                raise
            except Exception:  # the worker must outlive a bad poll (database restart, ...)
                log.exception("worker loop error; retrying")
            self.ingest.queued.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.ingest.queued.wait(), timeout=self.poll_s)
