"""What a process of agentkb holds while it runs — database (embedded or not), migrations, services,
HTTP clients — opened and closed in one place, for the API server and for `agentkb worker` alike."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pydantic_ai.models import create_async_httpx2_client

from agentkb import logs, secrecy
from agentkb.kb.embedders.registry import EmbedderRegistry
from agentkb.service import secrets
from agentkb.service.container import Services, build_services
from agentkb.settings import Settings
from agentkb.storage import migrate
from agentkb.storage.db import Database
from agentkb.storage.embedded import EmbeddedPostgres

log = logging.getLogger("agentkb")


@asynccontextmanager
async def open_runtime(settings: Settings, *, run_worker: bool) -> AsyncIterator[Services]:
    logs.mask_records()
    box = await asyncio.to_thread(open_secret_box, settings)
    embedded: EmbeddedPostgres | None = None
    url = settings.database_url
    if url is None:
        embedded = EmbeddedPostgres(settings.pg_dir)
        url = await asyncio.to_thread(embedded.start)
    db = Database(url, pool_size=settings.db_pool_size)
    services: Services | None = None
    worker_task: asyncio.Task[None] | None = None
    http_client = create_async_httpx2_client()
    try:
        await asyncio.to_thread(migrate.upgrade, url)
        await secrets.seal_plaintext(db, box)  # records from before secrets were encrypted
        services = build_services(settings, db, EmbedderRegistry(), http_client, box=box)
        await services.projects.ensure_default()
        if run_worker:
            worker_task = asyncio.create_task(services.jobs.work(), name="agentkb-ingest-worker")
        yield services
    finally:
        if worker_task is not None:
            worker_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker_task
        if services is not None:
            with contextlib.suppress(Exception):
                await services.jobs.release()
            await services.aclose()
        await http_client.aclose()
        await db.close()
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


async def run_worker(settings: Settings) -> None:
    """`agentkb worker`: only the ingestion worker, until SIGINT/SIGTERM."""
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with open_runtime(settings, run_worker=True) as services:
        log.info("ingestion worker %s started", services.jobs.worker_id)
        await stop.wait()
