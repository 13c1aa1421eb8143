"""`POST /api/sql/query`: MindsDB's SQL endpoint. Always HTTP 200; errors are `{"type": "error"}`."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON
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


@router.post("/api/sql/query")
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
