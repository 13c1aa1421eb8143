"""The web console at `/console`: server-rendered pages (Jinja2) over the services, made lively with htmx
and a little plain JavaScript; every asset ships in this package, so it works offline.

`install(app)` adds its static files and its door: one route that takes every request under `/console`,
imports the pages (`pages.py`, with Jinja2 and the templates) on the first one, in a thread, and hands each
request to them. `PUBLIC_PATHS` (the login form and the assets) are open without a credential;
`ConsoleSession` (see `session.py`) must wrap the API's `Authenticate` middleware.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import URLPath
from starlette.routing import BaseRoute, Match, NoMatchFound, Router
from starlette.types import Receive, Scope, Send

from agentkb.console.session import LOGIN_PATH, PREFIX, ConsoleSession

STATIC_DIR = Path(__file__).parent / "static"
STATIC_URL = f"{PREFIX}/static"
PUBLIC_PATHS = frozenset(
    {LOGIN_PATH} | {f"{STATIC_URL}/{p.name}" for p in STATIC_DIR.iterdir() if p.is_file()}
)


class ConsoleDoor(BaseRoute):
    """Every HTTP request whose path is `/console` or under it, handed to the pages' router; that router is
    imported on the first such request, in a thread (other requests are not held while it imports), under a
    lock. Its routes then match as if they were the app's own: a path none of them takes is the app's 404."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._pages: Router | None = None

    @property
    def routes(self) -> list[BaseRoute]:
        """The pages' routes once loaded (the metrics name a request by its page's template); none before."""
        return self._pages.routes if self._pages is not None else []

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        path: str = scope.get("path", "")
        if scope["type"] == "http" and (path == PREFIX or path.startswith(f"{PREFIX}/")):
            return Match.FULL, {}
        return Match.NONE, {}

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        raise NoMatchFound(name, path_params)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        pages = self._pages
        if pages is None:
            async with self._lock:
                pages = self._pages
                if pages is None:
                    pages = self._pages = await asyncio.to_thread(_load_pages)
        await pages(scope, receive, send)


def _load_pages() -> Router:
    from agentkb.console.pages import router

    return router


def install(app: FastAPI) -> None:
    app.mount(STATIC_URL, StaticFiles(directory=STATIC_DIR), name="console-static")
    app.router.routes.append(ConsoleDoor())


__all__ = ["PUBLIC_PATHS", "ConsoleSession", "install"]
