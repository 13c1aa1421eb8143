"""The application factory: lifespan (database, migrations, services), routers, error handlers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from agentkb import __version__
from agentkb.api import agents, errors, knowledge_bases, projects, status
from agentkb.api.deps import Services
from agentkb.api.middleware import RequestContext
from agentkb.errors import BadRequest
from agentkb.kb.embedders import config as embedding_config
from agentkb.service.agents import AgentService
from agentkb.service.knowledge_bases import KnowledgeBaseService
from agentkb.service.projects import ProjectService
from agentkb.settings import Settings
from agentkb.storage import migrate
from agentkb.storage import projects as project_rows
from agentkb.storage.db import Database
from agentkb.storage.embedded import EmbeddedPostgres

log = logging.getLogger("agentkb")


async def _dimension(config: dict[str, Any]) -> int:
    dim = embedding_config.known_dimension(config)
    if dim is None:
        raise BadRequest(
            f"The vector size of embedding model {config['model_name']!r} is not known; "
            "set 'embedding_model.dimensions'",
            title="Invalid embedding model",
        )
    return dim


def build_services(settings: Settings, db: Database) -> Services:
    return Services(
        settings=settings,
        projects=ProjectService(db, settings.default_project),
        agents=AgentService(db, settings.default_model),
        knowledge_bases=KnowledgeBaseService(db, settings.default_embedding_model, _dimension),
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
    try:
        await asyncio.to_thread(migrate.upgrade, url)
        async with db.transaction() as conn:
            await project_rows.ensure(conn, settings.default_project)
        app.state.services = build_services(settings, db)
        log.info("agentkb %s ready", __version__)
        yield
    finally:
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
    for module in (status, projects, agents, knowledge_bases):
        app.include_router(module.router)
    app.add_middleware(RequestContext, max_body_bytes=settings.max_body_bytes)
    return app
