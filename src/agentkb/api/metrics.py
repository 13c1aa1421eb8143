"""`GET /metrics` (Prometheus text format) and `RequestMetrics`, the ASGI middleware that counts and times
every HTTP request by method, route template and status (agentkb.metrics)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentkb import metrics
from agentkb.api.deps import ServicesDep

router = APIRouter(tags=["status"])

METRICS_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The process's metrics in Prometheus's text exposition format (docs/operations.md).",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
}


@router.get("/metrics", response_class=Response, responses=METRICS_RESPONSE)
async def prometheus_metrics(services: ServicesDep) -> Response:
    """Prometheus metrics: requests, ingestion, model calls, searches, jobs, the connection pool. Needs a
    credential when authentication is on (Prometheus sends one: `authorization` / `bearer_token`)."""
    return Response(await services.metrics.exposition(), media_type=metrics.CONTENT_TYPE)


def route_template(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """The matched route's path template (`/api/projects/{project_name}/agents`), never the raw path; for a
    request answered before routing (401, 413, 429) the route it would have matched; else `<unmatched>`."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    return _matched(scope, routes) or metrics.UNMATCHED_ROUTE


def _matched(scope: Scope, routes: Sequence[BaseRoute]) -> str | None:
    """The template of the first of `routes` that matches `scope`; inside a door (the console's, whose
    `routes` are its pages once loaded), the template of its route that matches."""
    for candidate in routes:
        match, _ = candidate.matches(scope)
        if match is Match.NONE:
            continue
        path = getattr(candidate, "path", None)
        if isinstance(path, str):
            return path
        inner = getattr(candidate, "routes", None)
        if isinstance(inner, list) and (found := _matched(scope, inner)) is not None:
            return found
    return None


class RequestMetrics:
    """Counts (`agentkb_http_requests_total`) and times (`agentkb_http_request_duration_seconds`) every HTTP
    request, to the end of its response body (a stream: to its last event)."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        metrics.http_requests_in_progress.inc()
        try:
            await self.app(scope, receive, send_status)
        finally:
            metrics.http_requests_in_progress.dec()
            labels = (scope["method"], route_template(scope, self.routes), str(status))
            metrics.http_requests.labels(*labels).inc()
            metrics.http_request_duration.labels(*labels).observe(time.perf_counter() - started)
