"""Running one ingestion job to its end: heartbeat, progress, cancel requests, and how it ended.

Every insert is a job (`storage.jobs`): a synchronous insert runs in its request, an async one in a worker
(`jobs.service.JobService`). The runner is the one place that records a job's progress and outcome.

A claimed job runs under its lease (`storage.jobs`: a session-level advisory lock on a connection held for the
run, taken when the worker claims the job). Every progress, heartbeat and outcome
update names this runner's worker id: when one finds the job is no longer this runner's (its lease connection
broke and another worker took it over), the run stops and records nothing more.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb import metrics
from agentkb.errors import AgentKBError, Conflict, Unavailable
from agentkb.ingest.request import JobCancelled, Progress
from agentkb.secrecy import mask_text
from agentkb.service.platform import RETRY_AFTER_S, database_unavailable
from agentkb.storage import jobs
from agentkb.storage.db import Database
from agentkb.storage.jobs import JobRow

log = logging.getLogger("agentkb.ingest")
Execute = Callable[[JobRow, Progress], Awaitable[None]]


def _masked(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: mask_text(v) if isinstance(v, str) else v for k, v in item.items()} for item in errors]


# A running job's counts are recorded at most this often (and always at its end). Recording them after every
# batch put a transaction on a second connection in each batch's path, for a record the job's final one
# replaces moments later. A cancel request is then seen at the next record, the next heartbeat (which stops
# the run) or not at all when the job ends first.
PROGRESS_EVERY_S = 1.0


class JobRunner:
    def __init__(
        self,
        db: Database,
        execute: Execute,
        *,
        heartbeat_s: float = 5.0,
        progress_every_s: float = PROGRESS_EVERY_S,
        lease_db: Database | None = None,
    ) -> None:
        """`lease_db`: where leases are held — a session of their own, so not through a transaction-mode
        pooler (default `db`)."""
        self.db = db
        self.lease_db = lease_db or db
        self.execute = execute
        self.heartbeat_s = heartbeat_s
        self.progress_every_s = progress_every_s
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._lost: set[str] = set()  # jobs found taken over by another worker

    def lease(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection to hold a job's lease on; on the way out every lease it holds is ended."""
        return self.lease_db.leasing()

    async def run_job(self, job: JobRow) -> JobRow:
        """Run a claimed or synchronous job to its end and record how it ended. A failure is re-raised
        (after being recorded) so a waiting request answers with its status. A claimed job's lease is held
        by the worker (`JobService.run_once`); a synchronous one takes none (it would cost every insert
        request a second connection): only its heartbeat says it is alive."""
        progress = Progress(job.id)
        started = time.perf_counter()
        final: JobRow | None = None  # the job as its end was recorded here
        beater = asyncio.create_task(self._beat(job.id, progress, asyncio.current_task()))
        try:
            await self.execute(job, progress)
            log.info(
                "ingest job %s ran to its end (attempt %d, worker %s)", job.id, job.attempts, self.worker_id
            )
        except (JobCancelled, asyncio.CancelledError) as exc:
            if job.id in self._lost:
                self._lost.discard(job.id)
                log.warning("ingest job %s was taken over by another worker: this run stopped", job.id)
                if isinstance(exc, asyncio.CancelledError) and (current := asyncio.current_task()):
                    current.uncancel()
                if job.mode == "sync":  # its heartbeat went stale (a database failover?) and it was failed
                    raise Unavailable(
                        f"Insert job {job.id} was interrupted (its heartbeat could not be recorded in time: a "
                        "database restart or failover?); nothing of it was stored: send it again",
                        title="Insert interrupted",
                        retry_after_s=RETRY_AFTER_S,
                    ) from None
                return await self._read(job.id)
            if not progress.cancel_requested:
                raise  # the process is stopping: the job stays claimed and is resumed or failed later
            final = await self._finish(job.id, "cancelled", progress, "cancelled on request")
            if isinstance(exc, asyncio.CancelledError):
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()
            if job.mode == "sync":  # the waiting request must not read "stored" as its answer
                raise Conflict(
                    f"Insert job {job.id} was cancelled; nothing of it was stored", title="Insert cancelled"
                ) from None
        except AgentKBError as exc:
            await self._finish(job.id, "failed", progress, exc.detail)
            raise
        except Exception as exc:
            if job.mode == "async" and database_unavailable(exc):
                # a restart or failover: nothing of the run was committed, and the job stays claimed (its
                # lease went with the connection) for a worker to take over once its heartbeat is stale —
                # on the new primary after a failover
                log.warning(
                    "ingest job %s lost the database (%s): left for a worker to take over", job.id, exc
                )
                raise
            log.exception("ingest job %s failed", job.id)
            await self._finish(job.id, "failed", progress, f"{type(exc).__name__}: {exc}")
            raise
        else:
            final = await self._finish(job.id, "succeeded", progress, None)
        finally:
            beater.cancel()
        log.info("ingest job %s: %s in %.2fs", job.id, progress.counts, time.perf_counter() - started)
        return final if final is not None else await self._read(job.id)  # as recorded: not read again

    async def _read(self, job_id: str) -> JobRow:
        async with self.db.connect() as conn:
            final = await jobs.get(conn, job_id)
        assert final is not None
        return final

    async def report(self, progress: Progress, counts: dict[str, Any]) -> None:
        """Record progress (at most every `progress_every_s`); raise `JobCancelled` when a cancel was requested
        meanwhile, or when the job is no longer this runner's."""
        progress.counts.update(counts)
        now = time.monotonic()
        if now - progress.recorded_at < self.progress_every_s:
            return
        progress.recorded_at = now
        async with self.db.transaction() as conn:
            state = await jobs.progress(
                conn, progress.job_id, progress.counts, _masked(progress.errors), self.worker_id
            )
        if state is None:
            self._lost.add(progress.job_id)
            raise JobCancelled
        if state:
            progress.cancel_requested = True
            raise JobCancelled

    async def _beat(self, job_id: str, progress: Progress, runner: asyncio.Task[Any] | None) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                async with self.db.transaction() as conn:
                    state = await jobs.heartbeat(conn, job_id, self.worker_id)
            except Exception as exc:  # noqa: BLE001 - the beat outlives one failure (a failover: the next
                # may reach the new primary); beats missed past the stale age end the job's claim
                log.warning(
                    "ingest job %s: a heartbeat failed (%s); beating on",
                    job_id,
                    type(exc).__name__,
                    exc_info=None if database_unavailable(exc) else exc,
                )
                continue
            if state is None:
                self._lost.add(job_id)
            elif state:
                progress.cancel_requested = True
            else:
                continue
            if runner is not None:
                runner.cancel()
            return

    async def _finish(self, job_id: str, state: str, progress: Progress, error: str | None) -> JobRow | None:
        """Record how the job ended, if it is still this runner's (the job as recorded; None if not); its error
        texts are masked (`secrecy.mask_text`) before they are stored."""
        masked = mask_text(error) if error else error
        async with self.db.autocommitted() as conn:  # one statement: no BEGIN and COMMIT round trips
            recorded = await jobs.finish(
                conn, job_id, state, progress.counts, _masked(progress.errors), masked, self.worker_id
            )
        if recorded is not None:
            metrics.jobs_finished.labels(state).inc()
        else:
            log.warning("ingest job %s ended here as %s, but another worker had taken it over", job_id, state)
        return recorded
