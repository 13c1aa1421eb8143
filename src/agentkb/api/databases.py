"""`/api/databases`: data sources, listed with projects and system databases in one namespace, as MindsDB does.

MindsDB clients use the trailing-slash forms (`/api/databases/`); both are served, without redirects.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON, problems
from agentkb.secrecy import mask_secrets
from agentkb.service.data_sources import is_system
from agentkb.service.types import SUPPORTED_ENGINES, DataSourceRow, Project

router = APIRouter(prefix="/api/databases", tags=["databases"])

INFORMATION_SCHEMA: dict[str, Any] = {
    "name": "information_schema",
    "type": "system",
    "id": None,
    "engine": None,
}


class DatabaseFields(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str | None = None
    engine: str | None = Field(None, description=", ".join(SUPPORTED_ENGINES))
    parameters: dict[str, Any] | None = Field(
        None, description="host, port, user, password, database, schema (postgres); db_file (sqlite)"
    )


class DatabaseRequest(BaseModel):
    database: DatabaseFields


class DatabaseRecord(BaseModel):
    name: str
    type: str = Field(description="system, project or data")
    id: int | None
    engine: str | None
    parameters: dict[str, Any] | None = Field(None, description="Data sources only; credentials masked.")


def data_record(row: DataSourceRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "type": "data",
        "id": row.id,
        "engine": row.engine,
        "parameters": mask_secrets(row.parameters),
    }


def project_record(project: Project) -> dict[str, Any]:
    return {"name": project.name, "type": "project", "id": project.id, "engine": None}


@router.get("", response_model=list[DatabaseRecord])
@router.get("/", include_in_schema=False)
async def list_databases(services: ServicesDep) -> Any:
    projects = [project_record(p) for p in await services.projects.list()]
    sources = [data_record(row) for row in await services.data_sources.list()]
    return JSON([INFORMATION_SCHEMA, *projects, *sources])


@router.post("", status_code=201, response_model=DatabaseRecord, responses=problems(400, 409, 413))
@router.post("/", status_code=201, include_in_schema=False)
async def create_database(body: DatabaseRequest, services: ServicesDep) -> Any:
    fields = body.database
    row = await services.data_sources.create(fields.name, fields.engine, fields.parameters)
    return JSON(data_record(row), status_code=201)


@router.get("/{database_name}", response_model=DatabaseRecord, responses=problems(404))
@router.get("/{database_name}/", include_in_schema=False)
async def get_database(database_name: str, services: ServicesDep) -> Any:
    if database_name.lower() == INFORMATION_SCHEMA["name"]:
        return JSON(INFORMATION_SCHEMA)
    project = None if is_system(database_name) else await services.data_sources.find_project(database_name)
    if project is not None:
        return JSON(project_record(project))
    return JSON(data_record(await services.data_sources.get(database_name)))


@router.put(
    "/{database_name}",
    response_model=DatabaseRecord,
    responses={201: {"model": DatabaseRecord, "description": "Created"}, **problems(400, 409, 413)},
)
@router.put("/{database_name}/", include_in_schema=False)
async def put_database(database_name: str, body: DatabaseRequest, services: ServicesDep) -> Any:
    """Create the data source (201), or update its parameters (200): the given ones over the stored
    ones; a secret sent back as `******` keeps the stored secret."""
    fields = body.database
    row, created = await services.data_sources.put(database_name, fields.engine, fields.parameters)
    return JSON(data_record(row), status_code=201 if created else 200)


@router.delete("/{database_name}", status_code=204, responses=problems(400, 404))
@router.delete("/{database_name}/", status_code=204, include_in_schema=False)
async def delete_database(database_name: str, services: ServicesDep) -> Response:
    await services.data_sources.delete(database_name)
    return Response(status_code=204)
