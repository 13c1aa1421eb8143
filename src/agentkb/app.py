"""The application factory: lifespan (the runtime: database, migrations, services), routers, handlers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from agentkb import __version__, console
from agentkb.api import (
    a2a,
    agents,
    auth,
    completions,
    config,
    databases,
    docs,
    errors,
    evaluations,
    files,
    jobs,
    knowledge_bases,
    metrics,
    openai_compat,
    projects,
    sql,
    sql_jobs,
    status,
    transfer,
)
from agentkb.api.auth import HEALTH_PATHS, Authenticate, document_security, public_paths
from agentkb.api.hosts import TrustedHosts
from agentkb.api.mcp_door import MCPBuilder, MCPDoor
from agentkb.api.metrics import RequestMetrics
from agentkb.api.middleware import RequestContext
from agentkb.api.ratelimit import RateLimit
from agentkb.runtime import open_runtime
from agentkb.service.platform import Shutdown
from agentkb.settings import Settings
from agentkb.storage.embedded import EmbeddedPostgres

log = logging.getLogger("agentkb")
# the API's groups in the order its documentation lists them (/docs, /openapi.json)
OPENAPI_TAGS = (
    "status",
    "auth",
    "projects",
    "agents",
    "knowledge bases",
    "ingestion jobs",
    "jobs",
    "databases",
    "sql",
    "files",
    "config",
    "OpenAI-compatible",
    "A2A",
)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    shutdown: Shutdown = app.state.shutdown
    door: MCPDoor = app.state.mcp
    embedded: EmbeddedPostgres | None = app.state.embedded
    app.state.embedded = None  # the runtime owns it now (and stops it)
    async with (
        open_runtime(
            settings,
            run_worker=settings.worker_enabled,
            run_scheduler=settings.scheduler_enabled,
            shutdown=shutdown,
            embedded=embedded,
        ) as services,
        door.running(),
    ):
        app.state.services = services
        log.info("agentkb %s ready", __version__)
        yield


def create_app(settings: Settings | None = None, *, embedded: EmbeddedPostgres | None = None) -> FastAPI:
    """The app over `settings`. `embedded`: the embedded PostgreSQL whose start the caller began
    (`agentkb serve` starts it while it imports this module), for the app's runtime to use and stop."""
    settings = settings or Settings()
    app = FastAPI(
        title="agentkb",
        version=__version__,
        description="AI agents over knowledge bases and SQL data, behind MindsDB's agents/KB HTTP API.",
        lifespan=lifespan,
        docs_url=None,  # served by api/docs.py from package files, not a CDN
        redoc_url=None,
        openapi_tags=[{"name": tag} for tag in OPENAPI_TAGS],
    )
    app.state.settings = settings
    app.state.embedded = embedded
    app.state.shutdown = Shutdown()  # begun by the server on SIGTERM (agentkb.cli.server)
    errors.install(app)
    # FastAPI matches a request against the routers in the order they were included, each route's pattern
    # in turn: the SQL endpoint, the one MindsDB's SDKs call for nearly everything, is tried first (~80 µs
    # less a request than as the eleventh router); the documentation keeps its order (`OPENAPI_TAGS`)
    for module in (
        sql,
        status,
        auth,
        projects,
        agents,
        completions,
        knowledge_bases,
        transfer,
        jobs,
        sql_jobs,
        databases,
        files,
        config,
    ):
        app.include_router(module.router)
    app.include_router(evaluations.router)
    app.include_router(metrics.router)
    app.include_router(openai_compat.router)  # agents as OpenAI chat models
    app.include_router(a2a.router)  # agents over A2A (MindsDB's /a2a/)
    app.state.mcp = MCPDoor(lambda: app.state.services, _load_mcp)  # MCP, built on its first request
    app.router.routes.extend(app.state.mcp.routes)
    console.install(app)  # the web console at /console (not in the OpenAPI schema)
    docs.install(app)
    document_security(app)
    # the last added runs first: forwarded headers, CORS, metrics, request id and body limit, the Host check,
    # the console's session, authentication, then the rate limit
    if settings.rate_limit_per_min > 0:
        app.add_middleware(RateLimit, per_minute=settings.rate_limit_per_min)
    app.add_middleware(Authenticate, public=public_paths(app) | console.PUBLIC_PATHS)
    app.add_middleware(console.ConsoleSession)  # before Authenticate: the console's cookie as the credential
    # before the console and the API: a Host this server does not answer to (DNS rebinding) is refused
    app.add_middleware(TrustedHosts, allowed=settings.allowed_hosts, exempt=HEALTH_PATHS)
    app.add_middleware(
        RequestContext,
        max_body_bytes=settings.max_body_bytes,
        max_upload_bytes=settings.max_upload_bytes,
        max_import_bytes=settings.max_import_bytes,
    )
    app.add_middleware(RequestMetrics, routes=app.router.routes)  # counts every answer, 401/413/429 too
    if settings.cors_origins:  # outermost: preflights are answered before anything else runs
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=["X-Request-Id", "X-Agentkb-Job", "X-Agentkb-Ingest"],
            max_age=600,
        )
    if settings.trusted_proxies:  # outermost: the client address and scheme everything else sees
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=settings.trusted_proxies)
    return app


def _load_mcp() -> MCPBuilder:
    """The MCP server's module, imported on the first MCP request (the SDK is a large import)."""
    from agentkb.api.mcp import door_apps

    return door_apps


def listening(app: FastAPI, addresses: Iterable[str]) -> None:
    """Tell a started app the addresses its server's sockets are bound to (`agentkb serve` does): one that
    is not loopback keeps authentication on (`AuthService.observe`), whatever `AGENTKB_HOST` says. An app
    without agentkb's services (another ASGI app served the same way) has nothing to tell."""
    services = getattr(app.state, "services", None)
    if services is None:
        return
    for address in addresses:
        services.auth.observe(address)
