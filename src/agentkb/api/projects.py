"""`/api/projects`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON, problems
from agentkb.api.schemas import ProjectRecord, ProjectRequest, project_record

router = APIRouter(prefix="/api/projects", tags=["projects"])


@router.get("", response_model=list[ProjectRecord])
async def list_projects(services: ServicesDep) -> Any:
    return JSON([project_record(p) for p in await services.projects.list()])


@router.post("", status_code=201, response_model=ProjectRecord, responses=problems(400, 409, 413))
async def create_project(body: ProjectRequest, services: ServicesDep) -> Any:
    return JSON(project_record(await services.projects.create(body.name)), status_code=201)


@router.get("/{project_name}", response_model=ProjectRecord, responses=problems(404))
async def get_project(project_name: str, services: ServicesDep) -> Any:
    return JSON(project_record(await services.projects.get(project_name)))


@router.delete("/{project_name}", status_code=204, responses=problems(400, 404, 409))
async def delete_project(project_name: str, services: ServicesDep) -> Response:
    await services.projects.delete(project_name)
    return Response(status_code=204)
