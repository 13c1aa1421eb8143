"""`/api/status`, `/api/util/ping` and `/health`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from agentkb import __version__
from agentkb.api.responses import JSON

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


@router.get("/api/status", response_model=StatusRecord)
async def status() -> Any:
    return JSON(
        {
            "mindsdb_version": COMPATIBLE_MINDSDB_VERSION,
            "agentkb_version": __version__,
            "environment": "local",
            "auth": {"confirmed": True, "http_auth_enabled": False, "provider": "disabled"},
        }
    )


@router.get("/api/util/ping", response_model=Ok)
async def ping() -> Any:
    return JSON({"status": "ok"})


@router.get("/health", response_model=Ok)
async def health() -> Any:
    return JSON({"status": "ok"})
