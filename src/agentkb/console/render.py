"""Rendering the console's pages: the Jinja2 templates shipped in the package, the context every page
shares (project, navigation, CSRF token, who is signed in), and errors shown as pages, not JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from fastapi import Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates

from agentkb import __version__
from agentkb.console.session import PREFIX, csrf_token
from agentkb.errors import AgentKBError
from agentkb.secrecy import mask_text
from agentkb.service.container import Services

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
templates.env.filters["pretty"] = lambda value: json.dumps(value, indent=2, ensure_ascii=False, default=str)


def services_of(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


async def page(
    request: Request,
    template: str,
    *,
    project: str | None = None,
    status: int = 200,
    nav: bool = True,
    **context: Any,
) -> HTMLResponse:
    """A whole page (htmx takes the part it asked for from it: `hx-select`). `nav=False` (the login
    form): no navigation, so nothing of the server shows before logging in."""
    services = services_of(request)
    principal = request.scope.get("state", {}).get("principal")
    projects = [p.name for p in await services.projects.list()] if nav else []
    base = {
        "nav": nav,
        "project": project or services.settings.default_project,
        "projects": projects,
        "principal": principal,
        "csrf": csrf_token(request),
        "prefix": PREFIX,
        "version": __version__,
        "login_enabled": services.auth.login_enabled,
    }
    return templates.TemplateResponse(request, template, {**base, **context}, status_code=status)


def see_other(url: str) -> RedirectResponse:
    """After a POST that changed something: the page to show (Post/Redirect/Get)."""
    return RedirectResponse(url, status_code=303)


def error_response(request: Request, exc: AgentKBError) -> Response:
    """An error as HTML: for htmx, a message swapped into the page's alert area (the form stays as it
    was); otherwise a page of its own."""
    detail = mask_text(exc.detail)
    if is_htmx(request):
        body = templates.get_template("_alert.html").render(title=exc.title, detail=detail)
        headers = {"HX-Retarget": "#alerts", "HX-Reswap": "innerHTML"}
        return HTMLResponse(body, status_code=exc.status, headers=headers)
    base = {"prefix": PREFIX, "csrf": csrf_token(request), "version": __version__}
    context = {**base, "title": exc.title, "detail": detail, "status": exc.status}
    return templates.TemplateResponse(request, "error.html", context, status_code=exc.status)


class ConsoleRoute(APIRoute):
    """A console route: an `AgentKBError` from a service becomes an HTML error (see `error_response`)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except AgentKBError as exc:
                return error_response(request, exc)

        return guarded
