"""Running one ingestion job to its end: heartbeat, progress, cancel requests, and how it ended.

Every insert is a job (`storage.jobs`): a synchronous insert runs in its request, an async one in a worker
(`service.jobs.JobWorker`). The runner is the one place that records a job's progress and outcome.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from agentkb import metrics
from agentkb.errors import AgentKBError, Conflict
from agentkb.ingest.request import JobCancelled, Progress
from agentkb.secrecy import mask_text
from agentkb.storage import jobs
from agentkb.storage.db import Database
from agentkb.storage.jobs import JobRow

log = logging.getLogger("agentkb.ingest")
Execute = Callable[[JobRow, Progress], Awaitable[None]]


def _masked(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: mask_text(v) if isinstance(v, str) else v for k, v in item.items()} for item in errors]


class JobRunner:
    def __init__(self, db: Database, execute: Execute, *, heartbeat_s: float = 5.0) -> None:
        self.db = db
        self.execute = execute
        self.heartbeat_s = heartbeat_s
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"

    async def run_job(self, job: JobRow) -> JobRow:
        """Run a claimed or synchronous job to its end and record how it ended. A failure is re-raised
        (after being recorded) so a waiting request answers with its status."""
        progress = Progress(job.id)
        started = time.perf_counter()
        beater = asyncio.create_task(self._beat(job.id, progress, asyncio.current_task()))
        try:
            await self.execute(job, progress)
        except (JobCancelled, asyncio.CancelledError) as exc:
            if not progress.cancel_requested:
                raise  # the process is stopping: the job stays claimed and is resumed or failed later
            await self._finish(job.id, "cancelled", progress, "cancelled on request")
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
            log.exception("ingest job %s failed", job.id)
            await self._finish(job.id, "failed", progress, f"{type(exc).__name__}: {exc}")
            raise
        else:
            await self._finish(job.id, "succeeded", progress, None)
        finally:
            beater.cancel()
        log.info("ingest job %s: %s in %.2fs", job.id, progress.counts, time.perf_counter() - started)
        async with self.db.connect() as conn:
            final = await jobs.get(conn, job.id)
        assert final is not None
        return final

    async def report(self, progress: Progress, counts: dict[str, Any]) -> None:
        """Record progress; raise `JobCancelled` when a cancel was requested meanwhile."""
        progress.counts.update(counts)
        async with self.db.transaction() as conn:
            if await jobs.progress(conn, progress.job_id, progress.counts, _masked(progress.errors)):
                progress.cancel_requested = True
        if progress.cancel_requested:
            raise JobCancelled

    async def _beat(self, job_id: str, progress: Progress, runner: asyncio.Task[Any] | None) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            async with self.db.transaction() as conn:
                if await jobs.heartbeat(conn, job_id) and runner is not None:
                    progress.cancel_requested = True
                    runner.cancel()
                    return

    async def _finish(self, job_id: str, state: str, progress: Progress, error: str | None) -> None:
        """Record how the job ended; its error texts are masked (`secrecy.mask_text`) before they are stored."""
        masked = mask_text(error) if error else error
        async with self.db.transaction() as conn:
            await jobs.finish(conn, job_id, state, progress.counts, _masked(progress.errors), masked)
        metrics.jobs_finished.labels(state).inc()
