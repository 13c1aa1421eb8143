"""JSON responses: compact orjson for success (as MindsDB), problem+json for errors; and the OpenAPI
declarations of both (`problems`, `event_stream`, `EMPTY_STRING`) and of a multipart upload's body
(`multipart_body`)."""

from __future__ import annotations

import logging
from typing import Any

import orjson
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agentkb.secrecy import mask_text
from agentkb.service.platform import RETRY_AFTER_S, database_unavailable

PROBLEM_MEDIA_TYPE = "application/problem+json"


class JSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class Problem(JSONResponse):
    """An error answer; its detail never shows a secret (`secrecy.mask_text`)."""

    media_type = PROBLEM_MEDIA_TYPE

    def __init__(self, status: int, title: str, detail: str, **extra: Any) -> None:
        super().__init__({"title": title, "detail": mask_text(detail), **extra}, status_code=status)

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def unexpected(request_id: str, exc: BaseException) -> Problem:
    """The 500 answer to an error no handler expected; the error is logged with the request id. One that
    says the database is unreachable (a restart, a failover) is a 503 with `Retry-After` instead."""
    if database_unavailable(exc):
        logging.getLogger("agentkb.api").warning(
            "request %s: the database is unreachable (%s)", request_id, type(exc).__name__
        )
        response = Problem(
            503,
            "Database unavailable",
            "The database did not answer (a restart or failover may be in progress); retry in a few seconds. "
            "A write that was in flight may or may not have been stored: inserts are idempotent, send it again",
            request_id=request_id,
        )
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
        return response
    logging.getLogger("agentkb.api").error("unhandled error in request %s", request_id, exc_info=exc)
    return Problem(
        500,
        type(exc).__name__,
        f"Internal error; quote request id {request_id} when reporting it",
        request_id=request_id,
    )


# --- OpenAPI declarations -----------------------------------------------------------------------------

_COMPONENTS: dict[str, Any] = {}


def schema_ref(model: Any, name: str | None = None) -> dict[str, str]:
    """A `$ref` to the schema of `model` (a pydantic model or any type), which `component_schemas`
    lists for the OpenAPI document's components."""
    name = name or model.__name__
    _COMPONENTS[name] = model
    return {"$ref": f"#/components/schemas/{name}"}


def component_schemas() -> dict[str, Any]:
    """The schemas `schema_ref` has named, with the models they use."""
    schemas: dict[str, Any] = {}
    for name, model in _COMPONENTS.items():
        adapter = TypeAdapter(model)
        schema = adapter.json_schema(ref_template="#/components/schemas/{model}", mode="serialization")
        schemas.update(schema.pop("$defs", {}))
        schemas[name] = schema
    return schemas


class ProblemBody(BaseModel):
    """Every error response: `application/problem+json`."""

    model_config = ConfigDict(extra="allow", title="Problem")
    title: str = Field(description="Short summary, e.g. 'Agent not found'.")
    detail: str = Field(description="What went wrong, for a person.")


_PROBLEM_DESCRIPTIONS = {
    400: "Invalid request: malformed body, parameter, name or value",
    401: "No valid credential (or, for a login, wrong user name or password)",
    404: "The project or resource named in the path does not exist",
    409: "Conflict: the name is taken, or the resource is in use",
    413: "The request body is larger than the server's limit",
    429: "Too many requests, failed logins or invalid credentials; retry after `Retry-After` seconds",
    502: "An embedding or language-model provider failed",
    503: "Not ready: the database is unreachable or slow, migrations are pending, or the server is shutting down",
}


def problems(*codes: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` entries for the problem+json errors an operation answers with."""
    ref = schema_ref(ProblemBody, "Problem")
    return {
        code: {"description": _PROBLEM_DESCRIPTIONS[code], "content": {PROBLEM_MEDIA_TYPE: {"schema": ref}}}
        for code in codes
    }


def event_stream(chunk: Any, description: str, *, name: str | None = None) -> dict[str, Any]:
    """A `text/event-stream` response whose events are `data: <JSON of chunk>` (OpenAPI 3.2 `itemSchema`)."""
    item = {
        "type": "object",
        "required": ["data"],
        "properties": {
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": schema_ref(chunk, name),
            },
        },
    }
    return {"description": description, "content": {"text/event-stream": {"itemSchema": item}}}


def multipart_body(
    fields: dict[str, Any],
    *,
    file_description: str | None = None,
    file_type: str | None = None,
    other_content: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The `openapi_extra` of a route that parses its multipart form itself: a required body whose form
    has a required binary `file` part (`file_description`, sent as `file_type`) and the text `fields`
    (their schemas by name); `other_content`, any other media types the body may take."""
    file: dict[str, Any] = {"type": "string", "format": "binary"}
    if file_description is not None:
        file["description"] = file_description
    form: dict[str, Any] = {
        "schema": {"type": "object", "required": ["file"], "properties": {"file": file, **fields}}
    }
    if file_type is not None:
        form["encoding"] = {"file": {"contentType": file_type}}
    return {
        "requestBody": {
            "required": True,
            "content": {"multipart/form-data": form, **(other_content or {})},
        }
    }


EMPTY_STRING: dict[str, Any] = {"application/json": {"schema": {"type": "string", "const": ""}}}
"""The JSON body `""` MindsDB answers some writes with."""
