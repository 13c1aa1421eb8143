"""`POST /api/sql/query`: MindsDB's SQL endpoint. Always HTTP 200; errors are `{"type": "error"}`.

`response_format` as MindsDB 26.1 answers it: absent, one JSON document; `jsonlines` (`application/jsonlines`)
or `sse` (`text/event-stream`, each line as `data: <line>` and a blank line), a table as a header line
`{"type": "table", "column_names": [...]}` and then its rows in lines of at most `ROWS_PER_LINE` rows (each a
JSON list of rows); `ok` and `error` answers as one line holding the whole document.

`POST /api/sql/query/utils/parametrize_constants`: MindsDB's helper that turns a statement's constants into
`:name` parameters.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, Literal

import orjson
from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON, problems, schema_ref
from agentkb.errors import AgentKBError
from agentkb.secrecy import mask_text

router = APIRouter(tags=["sql"])
log = logging.getLogger(__name__)

ROWS_PER_LINE = 1000
MEDIA_TYPES = {"jsonlines": "application/jsonlines", "sse": "text/event-stream"}


class SQLContext(BaseModel):
    db: str = "mindsdb"


class SQLRequest(BaseModel):
    query: str = Field(description="One SQL statement in MindsDB's dialect.")
    context: SQLContext | None = None
    params: dict[str, Any] | None = Field(
        None,
        description="Values for `:name` placeholders (a list binds `IN :name`) and for `@name` in "
        "`CREATE DATABASE … PARAMETERS` and `USING` values.",
    )
    response_format: Literal["sse", "jsonlines"] | None = Field(
        None, description="Absent: one JSON document; `jsonlines` or `sse`: a header line, then row lines."
    )


class SQLContextOut(BaseModel):
    db: str
    show_secrets: bool = False


class SQLTable(BaseModel):
    type: Literal["table"]
    column_names: list[str]
    data: list[list[Any]]
    context: SQLContextOut


class SQLOk(BaseModel):
    type: Literal["ok"]
    affected_rows: int | None
    context: SQLContextOut


class SQLError(BaseModel):
    type: Literal["error"]
    error_code: int
    error_message: str
    context: SQLContextOut


class SQLTableHeader(BaseModel):
    """The first line of a streamed table; each later line is a JSON list of rows."""

    type: Literal["table"]
    column_names: list[str]


SQLLine = SQLTableHeader | list[list[Any]] | SQLOk | SQLError


def _line_schema() -> dict[str, Any]:
    return {
        "type": "string",
        "contentMediaType": "application/json",
        "contentSchema": schema_ref(SQLLine, "SQLLine"),
    }


STREAMED: dict[str, Any] = {
    "application/jsonlines": {"itemSchema": schema_ref(SQLLine, "SQLLine")},
    "text/event-stream": {
        "itemSchema": {"type": "object", "required": ["data"], "properties": {"data": _line_schema()}}
    },
}


@router.post(
    "/api/sql/query",
    response_model=SQLTable | SQLOk | SQLError,
    responses={
        200: {
            "description": "A table, ok, or an error (SQL errors are 200 `type: error`); streamed as lines "
            "with `response_format`",
            "content": STREAMED,
        },
        **problems(400, 413),
    },
)
@router.post("/api/sql/query/", include_in_schema=False)
async def sql_query(body: SQLRequest, services: ServicesDep) -> Any:
    document = await _answer(body, services)
    if body.response_format is None:
        return JSON(document)
    lines = _lines(document)
    if body.response_format == "sse":
        lines = (f"data: {line}\n" for line in lines)
    return StreamingResponse(lines, media_type=MEDIA_TYPES[body.response_format])


async def _answer(body: SQLRequest, services: ServicesDep) -> dict[str, Any]:
    db = (body.context.db if body.context else None) or services.settings.default_project
    try:
        result = await services.sql.execute(body.query, db, body.params)
    except AgentKBError as exc:
        return {
            "type": "error",
            "error_code": 0,
            "error_message": mask_text(exc.detail),
            "context": {"db": db},
        }
    except Exception as exc:  # never a 500 here: MindsDB clients expect a typed error answer
        log.exception("SQL statement failed: %s", body.query[:200])
        return {
            "type": "error",
            "error_code": 0,
            "error_message": mask_text(f"{type(exc).__name__}: {exc}"),
            "context": {"db": db},
        }
    context = {"db": result.db, "show_secrets": False}
    if result.kind == "table":
        return {"type": "table", "column_names": result.column_names, "data": result.data, "context": context}
    return {"type": "ok", "affected_rows": result.affected_rows, "context": context}


def _lines(document: dict[str, Any]) -> Iterator[str]:
    """MindsDB's `stream_http_response_jsonlines`: JSON lines, each ending in a newline."""
    if document["type"] != "table":
        yield orjson.dumps(document).decode() + "\n"
        return
    yield orjson.dumps({"type": "table", "column_names": document["column_names"]}).decode() + "\n"
    rows = document["data"]
    for start in range(0, len(rows), ROWS_PER_LINE):
        yield orjson.dumps(rows[start : start + ROWS_PER_LINE]).decode() + "\n"


# --- utilities --------------------------------------------------------------------------------------------


class ParametrizeRequest(BaseModel):
    query: str = Field(description="One SQL statement in MindsDB's dialect.")


class QueryParameter(BaseModel):
    name: str
    value: Any
    type: str = Field(description="The value's Python type name: int, float, str, bool, NoneType.")


class Parametrized(BaseModel):
    query: str = Field(description="The statement with its constants replaced by `:name` parameters.")
    parameters: list[QueryParameter]
    databases: dict[str, list[str]] = Field(description="The tables the statement names, per database.")


@router.post(
    "/api/sql/query/utils/parametrize_constants",
    response_model=Parametrized,
    responses=problems(400, 413),
)
async def parametrize_constants(body: ParametrizeRequest, services: ServicesDep) -> Any:
    """The statement's constants as parameters, named after the column they are compared with or set
    to, or the alias of the expression they are in (MindsDB's helper; nothing is executed)."""
    return JSON(services.sql.parametrize(body.query))
