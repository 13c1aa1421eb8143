"""`/api/projects/{project_name}/knowledge_bases`: create, list, get, delete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON
from agentkb.api.schemas import KnowledgeBaseRecord, KnowledgeBaseRequest, kb_record
from agentkb.service.knowledge_bases import KnowledgeBaseInput

router = APIRouter(prefix="/api/projects/{project_name}/knowledge_bases", tags=["knowledge bases"])


@router.get("", response_model=list[KnowledgeBaseRecord])
async def list_knowledge_bases(project_name: str, services: ServicesDep) -> Any:
    return JSON([kb_record(kb) for kb in await services.knowledge_bases.list(project_name)])


@router.post("", status_code=201, response_model=KnowledgeBaseRecord)
async def create_knowledge_base(project_name: str, body: KnowledgeBaseRequest, services: ServicesDep) -> Any:
    fields = body.knowledge_base
    kb = await services.knowledge_bases.create(
        project_name, KnowledgeBaseInput(**fields.model_dump(include=set(KnowledgeBaseInput.__slots__)))
    )
    return JSON(kb_record(kb), status_code=201)


@router.get("/{kb_name}", response_model=KnowledgeBaseRecord)
async def get_knowledge_base(project_name: str, kb_name: str, services: ServicesDep) -> Any:
    return JSON(kb_record(await services.knowledge_bases.get(project_name, kb_name)))


@router.delete("/{kb_name}", status_code=204)
async def delete_knowledge_base(project_name: str, kb_name: str, services: ServicesDep) -> Response:
    await services.knowledge_bases.delete(project_name, kb_name)
    return Response(status_code=204)
