"""The application factory: lifespan (database, migrations, services), routers, error handlers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from agentkb import __version__
from agentkb.api import agents, databases, errors, knowledge_bases, projects, status
from agentkb.api.deps import Services
from agentkb.api.middleware import RequestContext
from agentkb.kb.embedders.registry import EmbedderRegistry
from agentkb.service.agents import AgentService
from agentkb.service.data_sources import DataSourceService
from agentkb.service.ingest import IngestService
from agentkb.service.knowledge_bases import KnowledgeBaseService
from agentkb.service.projects import ProjectService
from agentkb.service.search import SearchService
from agentkb.settings import Settings
from agentkb.storage import migrate
from agentkb.storage import projects as project_rows
from agentkb.storage.db import Database
from agentkb.storage.embedded import EmbeddedPostgres

log = logging.getLogger("agentkb")


def build_services(settings: Settings, db: Database, embedders: EmbedderRegistry) -> Services:
    data_sources = DataSourceService(db)
    return Services(
        settings=settings,
        projects=ProjectService(db, settings.default_project),
        agents=AgentService(db, settings.default_model),
        knowledge_bases=KnowledgeBaseService(db, settings.default_embedding_model, embedders.dimension),
        data_sources=data_sources,
        ingest=IngestService(db, embedders, data_sources),
        search=SearchService(db, embedders),
        embedders=embedders,
    )


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    embedded: EmbeddedPostgres | None = None
    url = settings.database_url
    if url is None:
        embedded = EmbeddedPostgres(settings.pg_dir)
        url = await asyncio.to_thread(embedded.start)
    db = Database(url, pool_size=settings.db_pool_size)
    services: Services | None = None
    try:
        await asyncio.to_thread(migrate.upgrade, url)
        async with db.transaction() as conn:
            await project_rows.ensure(conn, settings.default_project)
        services = build_services(settings, db, EmbedderRegistry())
        app.state.services = services
        log.info("agentkb %s ready", __version__)
        yield
    finally:
        if services is not None:
            services.data_sources.close()
            await services.embedders.aclose()
        await db.close()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    app = FastAPI(
        title="agentkb",
        version=__version__,
        description="AI agents over knowledge bases and SQL data, behind MindsDB's agents/KB HTTP API.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    errors.install(app)
    for module in (status, projects, agents, knowledge_bases, databases):
        app.include_router(module.router)
    app.add_middleware(RequestContext, max_body_bytes=settings.max_body_bytes)
    return app
