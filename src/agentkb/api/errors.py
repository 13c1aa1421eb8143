"""Exception handlers: every error leaves as problem+json `{"title", "detail"}` with the right status."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from agentkb.api.responses import Problem, component_schemas, unexpected
from agentkb.errors import AgentKBError, TooManyRequests, Unavailable

log = logging.getLogger("agentkb.api")

_HTTP_TITLES = {
    404: "Not found",
    405: "Method not allowed",
    413: "Payload too large",
    415: "Unsupported media type",
}


def _location(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body",)]
    return ".".join(parts) or "body"


def _describe(exc: RequestValidationError) -> tuple[str, str]:
    errors = exc.errors()
    messages = []
    title = "Invalid request body"
    for error in errors[:5]:
        where = _location(tuple(error.get("loc", ())))
        if error.get("type") == "missing":
            title = "Missing parameter"
            messages.append(f"'{where}' is required")
        elif error.get("type") == "json_invalid":
            messages.append("the body is not valid JSON")
        elif where == "body" and error.get("type") in ("model_attributes_type", "dict_type"):
            messages.append("the request body must be a JSON object")
        else:
            messages.append(f"'{where}': {error.get('msg', 'invalid value')}")
    if len(errors) > 5:
        messages.append(f"and {len(errors) - 5} more problem(s)")
    return title, "; ".join(messages) or "the request body is malformed"


def _document(schema: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document as the handlers below make it true: no operation answers FastAPI's 422
    `HTTPValidationError` (invalid requests are 400 problem+json), and the schemas that `responses=`
    declarations refer to are in the components."""
    for item in schema.get("paths", {}).values():
        for operation in item.values():
            responses = operation.get("responses", {}) if isinstance(operation, dict) else {}
            if "HTTPValidationError" in str(responses.get("422", {})):
                del responses["422"]
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    for name, component in component_schemas().items():
        components.setdefault(name, component)
    return schema


def install(app: FastAPI) -> None:
    generate = app.openapi
    app.openapi = lambda: _document(generate())  # type: ignore[method-assign]

    @app.exception_handler(AgentKBError)
    async def _agentkb(request: Request, exc: AgentKBError) -> Problem:
        if exc.status >= 500:
            log.error("request %s failed: %s", getattr(request.state, "request_id", "-"), exc.detail)
        response = Problem(exc.status, exc.title, exc.detail)
        if exc.status == 401:
            response.headers["WWW-Authenticate"] = "Bearer"
        if isinstance(exc, TooManyRequests | Unavailable):
            response.headers["Retry-After"] = str(exc.retry_after_s)
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Problem:
        title, detail = _describe(exc)
        return Problem(400, title, detail)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> Problem:
        title = _HTTP_TITLES.get(exc.status_code, "Error")
        detail = exc.detail if isinstance(exc.detail, str) else title
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"No route for {request.method} {request.url.path}"
        return Problem(exc.status_code, title, detail)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Problem:
        return unexpected(getattr(request.state, "request_id", "-"), exc)
