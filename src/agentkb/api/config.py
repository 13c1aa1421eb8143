"""`GET /api/config/`: the server's configuration in MindsDB 26.1's shape (read-only here).

`auth.http_auth_enabled` (as `/api/status` tells it), the default models (`default_llm` is agentkb's
`AGENTKB_DEFAULT_MODEL`) with every secret masked, the knowledge-base storage (always agentkb's own
PostgreSQL + pgvector) and the HTTP API. agentkb is configured by its environment and file (docs/
configuration.md), so MindsDB's `PUT /api/config/` is not served.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON
from agentkb.service.catalog import fit_to_show

router = APIRouter(prefix="/api/config", tags=["config"])

STORAGE_ENGINE = "pgvector"  # every knowledge base's chunks live in agentkb's PostgreSQL + pgvector


class ConfigAuth(BaseModel):
    http_auth_enabled: bool


class ResolvedStorage(BaseModel):
    engine: str
    available: bool
    default: bool
    source: str = Field(description="`config` (agentkb's one storage) or `fallback`.")


class KnowledgeBasesConfig(BaseModel):
    model_config = ConfigDict(extra="allow")
    storage: str | None
    default_storage: str | None
    resolved_storage: list[ResolvedStorage]
    available_vector_engines: list[str]
    pgvector_enabled: bool
    engines: list[str]


class HttpApiConfig(BaseModel):
    host: str
    port: int
    running: bool


class ApiConfig(BaseModel):
    http: HttpApiConfig


class ConfigRecord(BaseModel):
    auth: ConfigAuth
    default_llm: dict[str, Any] | None = Field(None, description="Model for agents created without one.")
    default_embedding_model: dict[str, Any] | None = Field(
        None, description="Embedding model for knowledge bases created without one."
    )
    default_reranking_model: dict[str, Any] | None = Field(
        None, description="Reranking model for knowledge bases created without one (absent when unset)."
    )
    knowledge_bases: KnowledgeBasesConfig
    api: ApiConfig


@router.get("", response_model=ConfigRecord)
@router.get("/", include_in_schema=False)
async def get_config(services: ServicesDep) -> Any:
    settings = services.settings
    answer: dict[str, Any] = {"auth": {"http_auth_enabled": await services.auth.enabled()}}
    defaults = {
        "default_llm": settings.default_model,
        "default_embedding_model": settings.default_embedding_model,
        "default_reranking_model": getattr(settings, "default_reranking_model", None),  # when configured
    }
    answer |= {key: fit_to_show(value) for key, value in defaults.items() if value}
    answer["knowledge_bases"] = {
        "storage": STORAGE_ENGINE,
        "default_storage": STORAGE_ENGINE,
        "resolved_storage": [
            {"engine": STORAGE_ENGINE, "available": True, "default": True, "source": "config"}
        ],
        "available_vector_engines": [STORAGE_ENGINE],
        "pgvector_enabled": True,
        "engines": [STORAGE_ENGINE],
    }
    answer["api"] = {"http": {"host": settings.host, "port": settings.port, "running": True}}
    return JSON(answer)
