"""The scheduler of MindsDB's JOBS: every `serve` and `worker` process runs one; PostgreSQL decides which
process runs each tick (`storage.sql_jobs.claim`: row lock, lease, next tick planned in the claim's
transaction), so a tick runs once however many processes poll.

- **When it looks**: at the earliest planned run (read after each pass, at most `poll_s` away), at once
  when this process creates a job or is asked to run one now (`SQLJobCatalog.changed`), and when one of its
  runs ends (that job's next tick may have come meanwhile).
- **A missed tick** (the servers were down): one run, then the next tick on the job's grid after now.
- **No overlap**: a job with a run in progress is not due; a tick that passes meanwhile runs once after it.
- **Limits**: at most `concurrency` runs at once in a process; a run longer than `run_timeout_s` is
  stopped and fails with that reason (its current statement's transaction rolls back).
- **Liveness**: a run beats a heartbeat; one whose process died (stale heartbeat, lease free) is taken
  over and its tick served again; a run whose job was dropped stops at its next beat.
- **Shutdown**: running runs are cancelled and handed back (`hand_back`): their jobs are due again at the
  tick they served, for the next process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from datetime import datetime

from agentkb import metrics
from agentkb.service.catalog.sql_jobs import SQLJobCatalog
from agentkb.service.scheduler.run import Outcome, SQLJobRunner
from agentkb.sql import schedule
from agentkb.storage import sql_jobs
from agentkb.storage.db import Database
from agentkb.storage.sql_jobs import SQLJobRow, SQLJobRunRow

log = logging.getLogger("agentkb.scheduler")


def plan_next(job: SQLJobRow, now: datetime) -> datetime | None:
    """The job's next tick after `now`; None when it runs no more (run once, or past its END)."""
    if job.schedule_str is None:
        return None
    following = schedule.next_tick(job.start_at, schedule.parse_every(job.schedule_str), now)
    if job.end_at is not None and following > job.end_at:
        return None
    return following


class Scheduler:
    def __init__(
        self,
        db: Database,
        catalog: SQLJobCatalog,
        runner: SQLJobRunner,
        *,
        poll_s: float = 1.0,
        heartbeat_s: float = 5.0,
        stale_after_s: float = 30.0,
        run_timeout_s: float = 3600.0,
        concurrency: int = 4,
        lease_db: Database | None = None,
    ) -> None:
        """`lease_db`: where the runs' leases are held — a session of their own, so not through a
        transaction-mode pooler (default `db`)."""
        self.db = db
        self.lease_db = lease_db or db
        self.catalog = catalog
        self.runner = runner
        self.poll_s = poll_s
        self.heartbeat_s = heartbeat_s
        self.stale_after_s = stale_after_s
        self.run_timeout_s = run_timeout_s
        self.concurrency = concurrency
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.running: set[asyncio.Task[None]] = set()
        self.run_ended = asyncio.Event()  # a run of this process ended: its job may be due again

    # -- the loop -----------------------------------------------------------------------------------------
    async def work(self, stop: asyncio.Event | None = None) -> None:
        """Start due runs until cancelled or `stop` is set; cancelling also cancels the running runs (hand
        them back with `hand_back` afterwards)."""
        stop = stop or asyncio.Event()
        try:
            while not stop.is_set():
                wait_s = self.poll_s
                self.catalog.changed.clear()  # what happens from here on wakes the sleep below
                self.run_ended.clear()
                try:
                    await self.start_due()
                    async with self.db.connect() as conn:
                        due_in = await sql_jobs.next_due_in(conn)
                    if due_in is not None:
                        wait_s = min(self.poll_s, max(due_in, 0.01))
                except asyncio.CancelledError:
                    raise
                except Exception:  # the scheduler must outlive a bad poll (database restart, ...)
                    log.exception("scheduler poll failed; retrying")
                await self._sleep(stop, wait_s)
        finally:
            for task in list(self.running):
                task.cancel()
            if self.running:
                await asyncio.gather(*self.running, return_exceptions=True)

    async def _sleep(self, stop: asyncio.Event, wait_s: float) -> None:
        """Until `wait_s` passes, a job is created or asked to run here, a run ends here, or `stop`."""
        events = (self.catalog.changed, self.run_ended, stop)
        waiters = {asyncio.ensure_future(event.wait()) for event in events}
        try:
            await asyncio.wait(waiters, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def start_due(self) -> int:
        """Claim due jobs and start their runs (up to `concurrency` at once); how many were started."""
        started = 0
        while len(self.running) < self.concurrency:
            lease = contextlib.AsyncExitStack()  # the run task closes it; here only when nothing is claimed
            try:
                conn = await lease.enter_async_context(self.lease_db.leasing())
                async with conn.begin():
                    claimed = await sql_jobs.claim(conn, self.worker_id, self.stale_after_s, plan_next)
            except BaseException:
                await lease.aclose()
                raise
            if claimed is None:
                await lease.aclose()
                break
            job, run = claimed
            task = asyncio.create_task(self._run(job, run, lease), name=f"agentkb-job-{job.id}")
            self.running.add(task)
            task.add_done_callback(self.running.discard)
            started += 1
        return started

    # -- one run ------------------------------------------------------------------------------------------
    async def _run(self, job: SQLJobRow, run: SQLJobRunRow, lease: contextlib.AsyncExitStack) -> None:
        """Run the claimed job and record how it ended; `lease` (the claim's connection) is closed at the end."""
        started = time.monotonic()
        metrics.sql_job_lag.observe(max((run.run_start - run.tick_at).total_seconds(), 0.0))
        log.info("job %s.%s: run %d for the tick at %s", job.project_name, job.name, run.id, run.tick_at)
        dropped = asyncio.Event()
        beater = asyncio.create_task(self._beat(job.id, run.id, dropped, asyncio.current_task()))
        outcome: Outcome | None = None
        try:
            async with self.db.connect() as conn:
                stored = await sql_jobs.last_values(conn, job.id)
                previous = await sql_jobs.previous_tick(conn, job.id, run.id)
            try:
                async with asyncio.timeout(self.run_timeout_s):
                    outcome = await self.runner.run(job, run.tick_at, previous or job.created_at, stored)
            except TimeoutError:
                outcome = Outcome(state="failed", error=f"timed out after {self.run_timeout_s:g} s")
            except asyncio.CancelledError:
                if not dropped.is_set():
                    raise  # the process is stopping: `hand_back` closes the run
                if current := asyncio.current_task():
                    current.uncancel()
                outcome = Outcome(state="failed", error="stopped: the job was dropped during this run")
            async with self.db.transaction() as conn:
                if outcome.state == "succeeded" and outcome.pending:
                    await sql_jobs.save_last_values(conn, job.id, outcome.pending)
                await sql_jobs.finish(
                    conn, run.id, outcome.state, outcome.error, outcome.query or None, outcome.ingest_job_ids
                )
            metrics.sql_job_runs.labels(outcome.state).inc()
            log.info(
                "job %s.%s: run %d %s in %.2f s%s",
                job.project_name,
                job.name,
                run.id,
                outcome.state,
                time.monotonic() - started,
                f": {outcome.error}" if outcome.error else "",
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("job %s.%s: could not record run %d", job.project_name, job.name, run.id)
        finally:
            beater.cancel()
            await lease.aclose()
            self.run_ended.set()

    async def _beat(
        self, job_id: int, run_id: int, dropped: asyncio.Event, runner: asyncio.Task[None] | None
    ) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                async with self.db.transaction() as conn:
                    alive = await sql_jobs.heartbeat(conn, job_id, run_id)
            except Exception:  # a missed beat is not fatal; the next one tries again
                log.warning("job %d: heartbeat failed", job_id, exc_info=True)
                continue
            if not alive:
                dropped.set()
                if runner is not None:
                    runner.cancel()
                return

    async def hand_back(self) -> int:
        """After `work` was cancelled: this process's interrupted runs are handed back (their jobs due again
        at the tick they served). Returns how many."""
        async with self.db.transaction() as conn:
            count = await sql_jobs.hand_back(conn, self.worker_id)
        if count:
            metrics.sql_job_runs.labels("handed_back").inc(count)
            log.info("handed %d interrupted job run(s) back", count)
        return count

    async def run_pending_once(self) -> int:
        """Start what is due and wait for those runs to end (one pass, without the loop: the tests' driver)."""
        started = await self.start_due()
        if self.running:
            await asyncio.gather(*list(self.running), return_exceptions=True)
        return started
