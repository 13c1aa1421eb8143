"""The MCP server's door in the app: its routes (`/mcp`, `/mcp/streamable`, `/mcp/sse`, `/mcp/messages/`)
are registered when the app is built, but the server behind them (`api/mcp.py`, the `mcp` SDK: a large
import) is imported and built on the first request to one of them, under a lock, and its session manager
then runs in a task group the app's lifespan holds (`running`) until the app stops."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup, TaskStatus
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from agentkb.service.container import Services

MCP_PATH = "/mcp"
STREAMABLE_PATH = "/mcp/streamable"  # MindsDB's streamable HTTP path
SSE_PATH = "/mcp/sse"  # MindsDB's SSE transport: the event stream (GET) ...
MESSAGES_PATH = "/mcp/messages/"  # ... and where its client POSTs (named by the stream's `endpoint` event)

ServicesGetter = Callable[[], "Services"]


@dataclass(frozen=True)
class MCPApps:
    """A built MCP server as the door serves it: the ASGI app behind each of the door's paths, and its
    session manager (run once, for as long as the app serves)."""

    apps: dict[str, ASGIApp]
    session_manager: Callable[[], AbstractAsyncContextManager[None]]


MCPBuilder = Callable[[ServicesGetter], MCPApps]
"""Builds the server over the services (`agentkb.api.mcp.door_apps`)."""


class MCPDoor:
    """The routes at `/mcp` of one app, and the lifespan part (`running`) that runs the server's session
    manager once the server is built. `load` imports the server's module and returns its builder; it runs in
    a thread, on the first MCP request, so other requests are not held while the SDK imports."""

    def __init__(self, services: ServicesGetter, load: Callable[[], MCPBuilder]) -> None:
        self._services = services
        self._load = load
        self._lock = asyncio.Lock()
        self._built: MCPApps | None = None
        self._group: TaskGroup | None = None
        self.routes: list[BaseRoute] = [
            Route(MCP_PATH, endpoint=_Deferred(self, MCP_PATH)),
            Route(STREAMABLE_PATH, endpoint=_Deferred(self, STREAMABLE_PATH)),
            Route(SSE_PATH, endpoint=_Deferred(self, SSE_PATH), methods=["GET"]),
            Mount(MESSAGES_PATH, app=_Deferred(self, MESSAGES_PATH)),
        ]

    @property
    def built(self) -> bool:
        """Whether the server has been built (by a first request)."""
        return self._built is not None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """For as long as the app serves (once per app): the task group the session manager runs in."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    async def app_for(self, path: str) -> ASGIApp:
        """The server's app behind `path`, the server built first if it is not yet."""
        built = self._built
        if built is None:
            async with self._lock:
                built = self._built
                if built is None:
                    built = await self._build()
                    self._built = built
        return built.apps[path]

    async def _build(self) -> MCPApps:
        group = self._group
        if group is None:
            raise RuntimeError("the MCP server is served only while the app runs (its lifespan)")
        builder = await asyncio.to_thread(self._load)
        built = builder(self._services)
        await group.start(_run_session_manager, built)
        return built


async def _run_session_manager(built: MCPApps, *, task_status: TaskStatus[None]) -> None:
    async with built.session_manager():
        task_status.started()
        await anyio.sleep_forever()


class _Deferred:
    """An ASGI app that hands each request to the server's app behind `path`, once the door has built it."""

    def __init__(self, door: MCPDoor, path: str) -> None:
        self.door = door
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = await self.door.app_for(self.path)
        await app(scope, receive, send)
