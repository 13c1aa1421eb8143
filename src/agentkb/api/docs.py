"""`/docs` (Swagger UI) and `/redoc`, served with their scripts from the `fastapi-offline` package's files
(`/docs/assets/…`), so the pages work with no access to a CDN."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS = "/docs"
REDOC = "/redoc"
OAUTH2_REDIRECT = "/docs/oauth2-redirect"
ASSETS = "/docs/assets"
ASSET_DIR = Path(fastapi_offline.__file__).parent / "static"
ASSET_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")
PATHS = frozenset({DOCS, REDOC, OAUTH2_REDIRECT, *(f"{ASSETS}/{name}" for name in ASSET_FILES)})
"""The pages and their assets: public (no credential), as the schema they show."""


def install(app: FastAPI) -> None:
    """Serve the docs pages on `app`, which must be made with `docs_url=None, redoc_url=None` (FastAPI's own
    pages load their scripts from a CDN)."""
    app.mount(ASSETS, StaticFiles(directory=ASSET_DIR), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"
    app.swagger_ui_oauth2_redirect_url = OAUTH2_REDIRECT

    @app.get(DOCS, include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=OAUTH2_REDIRECT,
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    @app.get(OAUTH2_REDIRECT, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(REDOC, include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/favicon.png",
            with_google_fonts=False,
        )
