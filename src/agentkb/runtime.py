"""What a process of agentkb holds while it runs — database (embedded or not), migrations, services,
HTTP clients — opened and closed in one place, for the API server and for `agentkb worker` alike; and how
such a process stops (`ExitGuard`: a grace period, a second signal)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from agentkb import logs, secrecy
from agentkb.agents.providers import ModelClient
from agentkb.guarded_http import guarded_httpx2_transport
from agentkb.kb.embedders.registry import EmbedderRegistry
from agentkb.service.container import Services, build_services
from agentkb.service.platform import Shutdown, seal_plaintext_secrets
from agentkb.settings import Settings
from agentkb.storage import migrate
from agentkb.storage.db import Database
from agentkb.storage.embedded import EmbeddedPostgres
from agentkb.storage.read_routing import ReadRouter

log = logging.getLogger("agentkb")


@asynccontextmanager
async def open_runtime(
    settings: Settings,
    *,
    run_worker: bool,
    run_scheduler: bool = False,
    shutdown: Shutdown | None = None,
    embedded: EmbeddedPostgres | None = None,
) -> AsyncIterator[Services]:
    """Open everything; on exit (or as soon as `shutdown` begins, for the worker and the scheduler) close it
    in order. `run_worker`: the ingestion worker runs in this process; `run_scheduler`: the jobs' scheduler.
    `embedded`: the embedded PostgreSQL, its start already begun (`EmbeddedPostgres.begin`), which this
    runtime then waits for and stops on exit; by default the runtime starts one itself when
    `AGENTKB_DATABASE_URL` is not set."""
    shutdown = shutdown or Shutdown()
    logs.mask_records()
    try:
        box = await asyncio.to_thread(open_secret_box, settings)
    except BaseException:
        if embedded is not None:  # begun by the caller: stopped once started, as on any other failure
            with contextlib.suppress(Exception):
                await asyncio.to_thread(embedded.start)
            await asyncio.to_thread(embedded.stop)
        raise
    url = settings.database_url
    if url is None:
        embedded = embedded or EmbeddedPostgres(settings.pg_dir)
        url = await asyncio.to_thread(embedded.start)
    pooled = settings.database_transaction_pooled
    db = Database(
        url,
        pool_size=settings.db_pool_size,
        hnsw_ef_search=settings.hnsw_ef_search,
        transaction_pooled=pooled,
    )
    replica = (
        Database(
            settings.database_read_url,
            pool_size=settings.db_pool_size,
            hnsw_ef_search=settings.hnsw_ef_search,
            transaction_pooled=pooled,
        )
        if settings.database_read_url
        else None
    )
    direct = (  # the sessions' work: leases, merges (AGENTKB_DATABASE_URL may be a transaction-mode pooler)
        Database(
            settings.database_direct_url,
            pool_size=settings.db_pool_size,
            hnsw_ef_search=settings.hnsw_ef_search,
        )
        if settings.database_direct_url
        else None
    )
    reads = ReadRouter(
        db, replica, max_lag_s=settings.read_replica_max_lag_s, read_your_writes=settings.read_your_writes
    )
    services: Services | None = None
    worker_task: asyncio.Task[None] | None = None
    scheduler_task: asyncio.Task[None] | None = None
    drain_task: asyncio.Task[None] | None = None
    http_client = ModelClient(guarded_httpx2_transport)  # made on the first model call
    try:
        await asyncio.to_thread(migrate.upgrade, settings.database_direct_url or url)
        # records from before secrets were encrypted; and none sealed under a key this process lacks
        await seal_plaintext_secrets(db, box, refuse_unknown=not settings.allow_unknown_secret_keys)
        services = build_services(
            settings,
            db,
            EmbedderRegistry(query_cache_size=settings.query_embedding_cache_size),
            http_client,
            shutdown,
            box=box,
            reads=reads,
            session_db=direct,
        )
        reads.start()
        await services.projects.ensure_default()
        await services.files.import_local_blobs()  # uploads an older version kept on this host's disk
        if run_worker:
            worker_task = asyncio.create_task(
                services.jobs.work(shutdown.stopping), name="agentkb-ingest-worker"
            )
        if run_scheduler:
            scheduler_task = asyncio.create_task(
                services.scheduler.work(shutdown.stopping), name="agentkb-job-scheduler"
            )
        drain_task = asyncio.create_task(
            _stop_worker_on_shutdown(services, worker_task, scheduler_task, settings.shutdown_grace_s),
            name="agentkb-shutdown",
        )
        yield services
    finally:
        shutdown.begin()
        if drain_task is not None:
            await drain_task
        if services is not None:
            with contextlib.suppress(Exception):
                await services.jobs.release()  # and interrupted synchronous inserts are marked failed
            await services.aclose()
        await http_client.aclose()
        await reads.close()
        await db.close()
        for other in (replica, direct):
            if other is not None:
                await other.close()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)


def open_secret_box(settings: Settings) -> secrecy.SecretBox:
    """The key that seals stored secrets: `AGENTKB_SECRET_KEY`, else the key file (made on first start)."""
    source = secrecy.load_keys(settings)
    for warning in source.warnings:
        log.warning("%s", warning)
    if source.created:
        log.info("generated a secret key in %s (back it up: the stored secrets need it)", source.path)
        if settings.database_url is not None:
            log.warning(
                "AGENTKB_DATABASE_URL is set but AGENTKB_SECRET_KEY is not: the key generated in %s belongs "
                "to this host; every process sharing the database must use the same key (set "
                "AGENTKB_SECRET_KEY on all of them, or copy the file)",
                source.path,
            )
    return source.box()


async def _stop_worker_on_shutdown(
    services: Services,
    worker_task: asyncio.Task[None] | None,
    scheduler_task: asyncio.Task[None] | None,
    grace_s: float,
) -> None:
    """Once shutdown begins: the worker claims nothing more, its running job is cancelled (the job's
    transaction rolls back) and handed back to the queue, then job event streams may end; the scheduler's
    running job runs are cancelled and handed back the same way. Each step gets a quarter of the grace
    period; one that overruns is left (a job not handed back is taken over once its heartbeat is stale)."""
    shutdown = services.shutdown
    await shutdown.stopping.wait()
    step_s = grace_s / 4
    try:
        if scheduler_task is not None:
            scheduler_task.cancel()
            done, _ = await asyncio.wait({scheduler_task}, timeout=step_s)
            if done:
                async with asyncio.timeout(step_s):
                    await services.scheduler.hand_back()
            else:
                log.warning("the job scheduler did not stop within %.1f s", step_s)
    except Exception:
        log.exception("could not hand the running job runs back")
    try:
        if worker_task is not None:
            worker_task.cancel()
            done, _ = await asyncio.wait({worker_task}, timeout=step_s)
            if not done:
                log.warning("the ingestion worker did not stop within %.1f s", step_s)
                return
            if not worker_task.cancelled() and worker_task.exception() is not None:
                log.error("the ingestion worker had failed", exc_info=worker_task.exception())
            async with asyncio.timeout(step_s):
                await services.jobs.hand_back()
    except Exception:
        log.exception("could not hand the running job back to the queue")
    finally:
        shutdown.jobs_released.set()


class ExitGuard:
    """How `agentkb serve` and `agentkb worker` stop. The first SIGTERM/SIGINT starts a graceful stop
    (`on_first`) and arms a deadline `grace_s` later; a second signal, or the deadline, ends the process at
    once with `os._exit`: nothing more is closed — open transactions die with their connections (PostgreSQL
    rolls them back), a running job is taken over once its heartbeat is stale, and an embedded PostgreSQL is
    left running for the next start to attach to, as after a kill."""

    def __init__(self, grace_s: float, on_first: Callable[[], None] = lambda: None) -> None:
        self.grace_s = grace_s
        self.on_first = on_first
        self.signalled = False
        self._timer: threading.Timer | None = None

    def __call__(self, sig: int) -> None:
        """Handle one signal (call from the signal handler)."""
        if self.signalled:
            _exit_now(f"second {signal.Signals(sig).name}: exiting at once", 128 + sig)
        self.signalled = True
        log.info(
            "%s: shutting down (within %g s; send it again to exit at once)",
            signal.Signals(sig).name,
            self.grace_s,
        )
        self.arm()
        self.on_first()

    def arm(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(self.grace_s, self._deadline)
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _deadline(self) -> None:
        _exit_now(f"shutdown took longer than the grace period ({self.grace_s:g} s): exiting now", 1)


def _exit_now(message: str, code: int) -> None:
    log.error(message)
    os._exit(code)


async def run_worker(settings: Settings) -> None:
    """`agentkb worker`: only the ingestion worker, until SIGINT/SIGTERM (a second one exits at once)."""
    shutdown = Shutdown()
    loop = asyncio.get_running_loop()

    def begin() -> None:
        loop.call_soon_threadsafe(shutdown.begin)

    guard = ExitGuard(settings.shutdown_grace_s, begin)
    previous = {
        sig: signal.signal(sig, lambda sig, _frame: guard(sig)) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        async with open_runtime(
            settings, run_worker=True, run_scheduler=settings.scheduler_enabled, shutdown=shutdown
        ) as services:
            log.info("ingestion worker %s started", services.jobs.worker_id)
            await shutdown.stopping.wait()
    finally:
        guard.cancel()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
