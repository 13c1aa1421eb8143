"""`/api/status`, `/api/util/ping`, `/health` (liveness) and `/health/ready` (readiness)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from agentkb import __version__
from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON, Problem

router = APIRouter(tags=["status"])

# The MindsDB release whose HTTP API agentkb serves; clients such as mindsdb_sdk read it.
COMPATIBLE_MINDSDB_VERSION = "26.1.0"


@router.get("/api/status")
async def status() -> Any:
    return JSON(
        {
            "mindsdb_version": COMPATIBLE_MINDSDB_VERSION,
            "agentkb_version": __version__,
            "environment": "local",
            "auth": {"confirmed": True, "http_auth_enabled": False, "provider": "disabled"},
        }
    )


@router.get("/api/util/ping")
async def ping() -> Any:
    return JSON({"status": "ok"})


@router.get("/health")
async def health() -> Any:
    """Liveness: 200 while the process runs (it asks nothing of the database)."""
    return JSON({"status": "ok"})


@router.get("/health/ready")
async def ready(services: ServicesDep) -> Any:
    """Readiness: 200 when PostgreSQL answers (within 2 s) and its schema is up to date; 503 problem+json
    while it does not, its migrations are pending, or the server is shutting down."""
    readiness = await services.health.readiness()
    if not readiness.ready:
        return Problem(503, "Not ready", readiness.detail)
    return JSON({"status": "ready"})
