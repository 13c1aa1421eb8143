"""`POST /api/sql/query`: MindsDB's SQL endpoint. Always HTTP 200; errors are `{"type": "error"}`."""

from __future__ import annotations

import logging
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON, problems
from agentkb.errors import AgentKBError
from agentkb.secrecy import mask_text

router = APIRouter(tags=["sql"])
log = logging.getLogger(__name__)


class SQLContext(BaseModel):
    db: str = "mindsdb"


class SQLRequest(BaseModel):
    query: str = Field(description="One SQL statement in MindsDB's dialect.")
    context: SQLContext | None = None
    params: dict[str, Any] | None = Field(None, description="Values for `:name` placeholders.")


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


@router.post(
    "/api/sql/query",
    response_model=SQLTable | SQLOk | SQLError,
    responses={
        200: {"description": "A table, ok, or an error (SQL errors are 200 `type: error`)"},
        **problems(400, 413),
    },
)
@router.post("/api/sql/query/", include_in_schema=False)
async def sql_query(body: SQLRequest, services: ServicesDep) -> Any:
    db = (body.context.db if body.context else None) or services.settings.default_project
    try:
        result = await services.sql.execute(body.query, db, body.params)
    except AgentKBError as exc:
        return JSON(
            {"type": "error", "error_code": 0, "error_message": mask_text(exc.detail), "context": {"db": db}}
        )
    except Exception as exc:  # never a 500 here: MindsDB clients expect a typed error answer
        log.exception("SQL statement failed: %s", body.query[:200])
        return JSON(
            {
                "type": "error",
                "error_code": 0,
                "error_message": mask_text(f"{type(exc).__name__}: {exc}"),
                "context": {"db": db},
            }
        )
    context = {"db": result.db, "show_secrets": False}
    if result.kind == "table":
        return JSON(
            {"type": "table", "column_names": result.column_names, "data": result.data, "context": context}
        )
    return JSON({"type": "ok", "affected_rows": result.affected_rows, "context": context})
