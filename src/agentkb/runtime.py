"""What a process of agentkb holds while it runs — database (embedded or not), migrations, services,
HTTP clients — opened and closed in one place, for the API server and for `agentkb worker` alike."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
from pydantic_ai.models import create_async_httpx2_client

from agentkb.api.deps import Services
from agentkb.ingest.file_source import FileSource
from agentkb.ingest.jobs import JobWorker
from agentkb.ingest.url_source import UrlSource
from agentkb.kb.embedders.registry import EmbedderRegistry
from agentkb.service.agents import AgentService
from agentkb.service.completions import CompletionService
from agentkb.service.data_sources import DataSourceService
from agentkb.service.files import FileService
from agentkb.service.ingest import IngestService
from agentkb.service.knowledge_bases import KnowledgeBaseService
from agentkb.service.projects import ProjectService
from agentkb.service.search import SearchService
from agentkb.settings import Settings
from agentkb.storage import jobs, migrate
from agentkb.storage import projects as project_rows
from agentkb.storage.db import Database
from agentkb.storage.embedded import EmbeddedPostgres

log = logging.getLogger("agentkb")


def build_services(
    settings: Settings, db: Database, embedders: EmbedderRegistry, http_client: httpx2.AsyncClient
) -> Services:
    """`http_client` is the one HTTP client of the LLM providers (the runtime owns and closes it)."""
    data_sources = DataSourceService(db)
    agent_service = AgentService(db, settings.default_model)
    kb_service = KnowledgeBaseService(db, settings.default_embedding_model, embedders.dimension)
    search = SearchService(db, embedders)
    files = FileService(db, settings.data_dir / "files", max_bytes=settings.max_upload_bytes)
    ingest = IngestService(db, embedders, data_sources, heartbeat_s=settings.job_heartbeat_s)
    ingest.document_sources["files"] = FileSource(files)
    ingest.document_sources["urls"] = UrlSource(settings.crawl_allow_private)
    return Services(
        settings=settings,
        projects=ProjectService(db, settings.default_project),
        agents=agent_service,
        knowledge_bases=kb_service,
        data_sources=data_sources,
        ingest=ingest,
        search=search,
        embedders=embedders,
        files=files,
        completions=CompletionService(db, agent_service, search, data_sources, kb_service, settings, http_client),
    )


@asynccontextmanager
async def open_runtime(settings: Settings, *, run_worker: bool) -> AsyncIterator[Services]:
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
        async with db.transaction() as conn:
            await project_rows.ensure(conn, settings.default_project)
        services = build_services(settings, db, EmbedderRegistry(), http_client)
        if run_worker:
            worker = JobWorker(services.ingest, db, stale_after_s=settings.job_stale_after_s)
            worker_task = asyncio.create_task(worker.run(), name="agentkb-ingest-worker")
        yield services
    finally:
        if worker_task is not None:
            worker_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker_task
        if services is not None:
            with contextlib.suppress(Exception):
                async with db.transaction() as conn:
                    await jobs.release(conn, services.ingest.worker_id)
            services.data_sources.close()
            await services.embedders.aclose()
            await services.search.aclose()
        await http_client.aclose()
        await db.close()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)


async def run_worker(settings: Settings) -> None:
    """`agentkb worker`: only the ingestion worker, until SIGINT/SIGTERM."""
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with open_runtime(settings, run_worker=True) as services:
        log.info("ingestion worker %s started", services.ingest.worker_id)
        await stop.wait()
