"""`/api/status`, `/api/util/ping`, `/health` (liveness) and `/health/ready` (readiness)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel

from agentkb import __version__
from agentkb.api.auth import credential
from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON, Problem, problems

router = APIRouter(tags=["status"])

# The MindsDB release whose HTTP API agentkb serves; clients such as mindsdb_sdk read it.
COMPATIBLE_MINDSDB_VERSION = "26.1.0"


class StatusAuth(BaseModel):
    confirmed: bool
    http_auth_enabled: bool
    provider: str


class StatusRecord(BaseModel):
    mindsdb_version: str
    agentkb_version: str
    environment: str
    auth: StatusAuth


class Ok(BaseModel):
    status: str


class Ready(BaseModel):
    status: Literal["ready"]


@router.get("/api/status", response_model=StatusRecord)
async def status(request: Request, services: ServicesDep) -> Any:
    """Open without a credential (as MindsDB's): `auth.http_auth_enabled` tells clients whether to log in,
    `auth.confirmed` whether the credential sent (if any) is accepted."""
    enabled = await services.auth.enabled()
    confirmed = not enabled or await services.auth.authenticate(credential(request.headers)) is not None
    return JSON(
        {
            "mindsdb_version": COMPATIBLE_MINDSDB_VERSION,
            "agentkb_version": __version__,
            "environment": "local",
            "auth": {
                "confirmed": confirmed,
                "http_auth_enabled": enabled,
                "provider": "local" if enabled else "disabled",
            },
        }
    )


@router.get("/api/util/ping", response_model=Ok)
async def ping() -> Any:
    return JSON({"status": "ok"})


@router.get("/health", response_model=Ok)
async def health() -> Any:
    """Liveness: 200 while the process runs (it asks nothing of the database)."""
    return JSON({"status": "ok"})


@router.get("/health/ready", response_model=Ready, responses=problems(503))
async def ready(services: ServicesDep) -> Any:
    """Readiness: 200 when PostgreSQL answers (within 2 s) and its schema is up to date; 503 problem+json
    while it does not, its migrations are pending, or the server is shutting down."""
    readiness = await services.health.readiness()
    if not readiness.ready:
        return Problem(503, "Not ready", readiness.detail)
    return JSON({"status": "ready"})
