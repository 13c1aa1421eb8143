"""Ingestion jobs: what the API shows of them (list, one, a change feed, cancel), and the worker that claims
queued jobs from PostgreSQL (`FOR UPDATE SKIP LOCKED`) and runs them.

The API server runs one worker in-process; `agentkb worker` runs more, on any machine that reaches the same
database. A worker holds the lease of the job it runs (`storage.jobs`: a session-level advisory lock, which
PostgreSQL drops when the worker's connection ends). A job whose worker is gone (heartbeat older than
`stale_after_s` and lease free: crash, kill, lost host) is claimed again and re-run — inserts are idempotent
upserts inside one transaction, so a re-run finishes the work without duplicating it — up to `MAX_ATTEMPTS`
times, then it fails with the reason. A live worker, however slow, keeps its job. Synchronous inserts whose
server died are marked failed (their transaction rolled back: nothing of them is visible).

Why not a queue library (procrastinate, pgqueuer, ...): the job row *is* the API's record (counts, errors,
MindsDB's query id and statement, a partitioned insert's resume point) and synchronous inserts are jobs run
by their own request; those libraries keep their own job tables and run every job in a worker, so they would
add a second source of truth without replacing this one's claim (`FOR UPDATE SKIP LOCKED`), cancel or event
feed. Their stalled-job recovery is a heartbeat timeout, which the lease makes safe here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import datetime

from agentkb.errors import NotFound
from agentkb.service.catalog.knowledge_bases import KnowledgeBaseService
from agentkb.service.jobs.runner import JobRunner
from agentkb.service.platform import access
from agentkb.storage import jobs
from agentkb.storage.db import Database
from agentkb.storage.jobs import TERMINAL, JobRow
from agentkb.storage.knowledge_bases import KnowledgeBaseRow

log = logging.getLogger("agentkb.worker")
MAX_ATTEMPTS = 3
WATCH_POLL_S = 0.25


class JobService:
    def __init__(
        self,
        db: Database,
        runner: JobRunner,
        queued: asyncio.Event,
        knowledge_bases: KnowledgeBaseService,
        *,
        stale_after_s: float = 30.0,
        poll_s: float = 1.0,
    ) -> None:
        """`runner` runs the jobs this worker claims; `queued` is set when a job is queued (the ingest
        service's), to wake the worker."""
        self.db = db
        self.runner = runner
        self.queued = queued
        self.knowledge_bases = knowledge_bases
        self.stale_after_s = stale_after_s
        self.poll_s = poll_s
        self.jobs_run = 0

    @property
    def worker_id(self) -> str:
        return self.runner.worker_id

    # -- what the API shows -------------------------------------------------------------------------------

    async def list(
        self, project_name: str, kb_name: str, limit: int
    ) -> tuple[KnowledgeBaseRow, list[JobRow]]:
        kb = await self.knowledge_bases.get(project_name, kb_name)
        async with self.db.connect() as conn:
            return kb, await jobs.list_for_kb(conn, kb.id, limit)

    async def get(self, project_name: str, kb_name: str, job_id: str) -> tuple[KnowledgeBaseRow, JobRow]:
        kb = await self.knowledge_bases.get(project_name, kb_name)
        async with self.db.connect() as conn:
            job = await jobs.get(conn, job_id)
        if job is None or job.kb_id != kb.id:
            raise NotFound(f"Job {job_id} of knowledge base {kb_name} does not exist", title="Job not found")
        return kb, job

    async def cancel(self, project_name: str, kb_name: str, job_id: str) -> tuple[KnowledgeBaseRow, JobRow]:
        """A queued job ends at once, a running one at its next progress check (its transaction is rolled
        back, so nothing of it is stored). A finished job is left as it is."""
        access.require_write("cancelling a job")
        kb, job = await self.get(project_name, kb_name, job_id)
        if job.state not in TERMINAL:
            async with self.db.transaction() as conn:
                job = await jobs.request_cancel(conn, job_id) or job
        return kb, job

    async def watch(self, job: JobRow) -> AsyncIterator[JobRow]:
        """The job each time it changes, until it ends."""
        last: datetime | None = None
        current: JobRow | None = job
        while current is not None:
            if current.updated_at != last or current.state in TERMINAL:
                last = current.updated_at
                yield current
            if current.state in TERMINAL:
                return
            await asyncio.sleep(WATCH_POLL_S)
            async with self.db.connect() as conn:
                current = await jobs.get(conn, job.id)

    # -- the worker -----------------------------------------------------------------------------------------

    async def run_once(self) -> bool:
        """Claim and run one job, holding its lease meanwhile; False when there was none."""
        async with self.runner.lease() as lease:
            async with lease.begin():
                swept = await jobs.fail_abandoned_sync(lease, self.stale_after_s)
                job = await jobs.claim(lease, self.worker_id, self.stale_after_s)
            if swept:
                log.warning("marked %d interrupted synchronous insert(s) failed", swept)
            if job is None:
                return False
            if job.attempts > MAX_ATTEMPTS:
                async with self.db.transaction() as conn:
                    await jobs.finish(
                        conn,
                        job.id,
                        "failed",
                        job.counts,
                        job.errors,
                        f"gave up after {MAX_ATTEMPTS} attempts: its worker stopped each time",
                        self.worker_id,
                    )
                return True
            log.info("worker %s runs job %s (attempt %d)", self.worker_id, job.id, job.attempts)
            try:
                await self.runner.run_job(job)
            except Exception:  # noqa: BLE001 - run_job has recorded it on the job
                log.info("job %s ended with an error", job.id)
            self.jobs_run += 1
            return True

    async def work(self, stop: asyncio.Event | None = None) -> None:
        """Claim and run jobs until cancelled, or until `stop` is set (then nothing more is claimed; cancel
        the task to interrupt a running job, whose transaction then rolls back, and `hand_back()` it)."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            try:
                if await self.run_once():
                    continue
            except asyncio.CancelledError:
                raise
            except Exception:  # the worker must outlive a bad poll (database restart, ...)
                log.exception("worker loop error; retrying")
            self.queued.clear()
            woken = asyncio.ensure_future(self.queued.wait())
            stopped = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait({woken, stopped}, timeout=self.poll_s, return_when=asyncio.FIRST_COMPLETED)
            finally:
                woken.cancel()
                stopped.cancel()

    async def hand_back(self) -> int:
        """Put this process's running async jobs back in the queue (its worker was stopped): they resume on
        the next worker that polls, here after a restart or elsewhere. Returns how many."""
        async with self.db.transaction() as conn:
            count = await jobs.hand_back(conn, self.worker_id)
        if count:
            log.info("handed %d running job(s) back to the queue", count)
        return count

    async def release(self) -> None:
        """On shutdown: hand this process's async jobs back to the queue and mark its interrupted
        synchronous inserts failed (their requests are gone; their transactions rolled back)."""
        async with self.db.transaction() as conn:
            await jobs.release(conn, self.worker_id)
