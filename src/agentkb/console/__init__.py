"""The web console at `/console`: server-rendered pages (Jinja2) over the services, made lively with htmx
and a little plain JavaScript; every asset ships in this package, so it works offline.

`install(app)` adds its routes and static files; `PUBLIC_PATHS` (the login form and the assets) are open
without a credential; `ConsoleSession` (see `session.py`) must wrap the API's `Authenticate` middleware.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles

from agentkb.console import agents, data_sources, ingest, jobs, knowledge_bases, login
from agentkb.console.session import LOGIN_PATH, PREFIX, ConsoleSession

STATIC_DIR = Path(__file__).parent / "static"
STATIC_URL = f"{PREFIX}/static"
PUBLIC_PATHS = frozenset(
    {LOGIN_PATH} | {f"{STATIC_URL}/{p.name}" for p in STATIC_DIR.iterdir() if p.is_file()}
)

router = APIRouter()
for module in (login, agents, knowledge_bases, ingest, data_sources, jobs):
    router.include_router(module.router, include_in_schema=False)


def install(app: FastAPI) -> None:
    app.include_router(router)
    app.mount(STATIC_URL, StaticFiles(directory=STATIC_DIR), name="console-static")


__all__ = ["PUBLIC_PATHS", "ConsoleSession", "install"]
