"""`/api/databases`: data sources, listed with projects and system databases (`information_schema`, `log`) in
one namespace, in MindsDB 26.1's record shapes, except that `connection_data` never shows a secret (masked
as `******`; send it back unchanged to keep it).

MindsDB clients use the trailing-slash forms (`/api/databases/`); both are served, without redirects.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON, problems
from agentkb.service.catalog import fit_to_show, is_system
from agentkb.service.types import SUPPORTED_ENGINES, DataSourceRow, Project
from agentkb.timestamps import timestamp

router = APIRouter(prefix="/api/databases", tags=["databases"])

SYSTEM_DATABASES = ("information_schema", "log")


def system_record(name: str) -> dict[str, Any]:
    return {"name": name, "type": "system", "id": None, "engine": None}


class DatabaseFields(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str | None = None
    engine: str | None = Field(None, description=", ".join(SUPPORTED_ENGINES))
    parameters: dict[str, Any] | None = Field(
        None, description="host, port, user, password, database, schema (postgres); db_file (sqlite)"
    )


class DatabaseRequest(BaseModel):
    database: DatabaseFields
    check_connection: bool = Field(
        False,
        description="Connect (and answer 400 'Connection error' on failure) before storing. Without it the "
        "parameters are stored as given, as MindsDB does, and checked when the data source is first used.",
    )


class DatabaseCreated(BaseModel):
    """MindsDB's answer to a create: exactly these four fields."""

    name: str
    type: str = Field(description="system, project or data")
    id: int | None
    engine: str | None


class DatabaseRecord(DatabaseCreated):
    """A data source carries its `connection_data` (every secret masked), `class_type`, `permanent` and
    `date_last_update`; a project or system database only the four fields."""

    connection_data: dict[str, Any] | None = Field(None, description="Data sources only; secrets masked.")
    class_type: str | None = None
    permanent: bool | None = None
    date_last_update: str | None = Field(None, description="UTC, `YYYY-MM-DD HH:MM:SS.ffffff`.")


class DatabaseListEntry(DatabaseCreated):
    visible: bool
    deletable: bool
    class_type: str | None = None
    connection_data: dict[str, Any] | None = Field(None, description="Data sources only; secrets masked.")


def created_record(row: DataSourceRow) -> dict[str, Any]:
    return {"name": row.name, "type": "data", "engine": row.engine, "id": row.id}


def data_record(row: DataSourceRow) -> dict[str, Any]:
    return {
        **created_record(row),
        "connection_data": fit_to_show(row).parameters,
        "class_type": "sql",
        "permanent": False,
        "date_last_update": timestamp(row.updated_at),
    }


def project_record(project: Project) -> dict[str, Any]:
    return {"name": project.name, "type": "project", "id": project.id, "engine": None}


@router.get("", response_model=list[DatabaseListEntry])
@router.get("/", include_in_schema=False)
async def list_databases(services: ServicesDep) -> Any:
    """System databases, projects, then data sources, as MindsDB lists them."""
    default = services.settings.default_project
    entries = [{**system_record(name), "visible": True, "deletable": False} for name in SYSTEM_DATABASES]
    entries += [
        {**project_record(p), "visible": True, "deletable": p.name != default}
        for p in await services.projects.list()
    ]
    entries += [
        {
            **created_record(row),
            "class_type": "sql",
            "connection_data": fit_to_show(row).parameters,
            "visible": True,
            "deletable": True,
        }
        for row in await services.data_sources.list()
    ]
    return JSON(entries)


@router.post("", status_code=201, response_model=DatabaseCreated, responses=problems(400, 409, 413))
@router.post("/", status_code=201, include_in_schema=False)
async def create_database(body: DatabaseRequest, services: ServicesDep) -> Any:
    fields = body.database
    row = await services.data_sources.create(
        fields.name, fields.engine, fields.parameters, keep_case=True, check_connection=body.check_connection
    )
    return JSON(created_record(row), status_code=201)


@router.get("/{database_name}", response_model=DatabaseRecord, responses=problems(404))
@router.get("/{database_name}/", include_in_schema=False)
async def get_database(database_name: str, services: ServicesDep) -> Any:
    if database_name.lower() in SYSTEM_DATABASES:
        return JSON(system_record(database_name.lower()))
    project = None if is_system(database_name) else await services.data_sources.find_project(database_name)
    if project is not None:
        return JSON(project_record(project))
    return JSON(data_record(await services.data_sources.get(database_name)))


@router.put(
    "/{database_name}",
    response_model=DatabaseRecord,
    responses={201: {"model": DatabaseCreated, "description": "Created"}, **problems(400, 409, 413)},
)
@router.put("/{database_name}/", include_in_schema=False)
async def put_database(database_name: str, body: DatabaseRequest, services: ServicesDep) -> Any:
    """Create the data source (201, MindsDB's four fields), or update its parameters (200, the record):
    the given ones over the stored ones; a secret sent back as `******` keeps the stored secret."""
    fields = body.database
    row, created = await services.data_sources.put(
        database_name,
        fields.engine,
        fields.parameters,
        keep_case=True,
        check_connection=body.check_connection,
    )
    return JSON(created_record(row), status_code=201) if created else JSON(data_record(row))


@router.delete("/{database_name}", status_code=204, responses=problems(400, 404))
@router.delete("/{database_name}/", status_code=204, include_in_schema=False)
async def delete_database(database_name: str, services: ServicesDep) -> Response:
    await services.data_sources.delete(database_name)
    return Response(status_code=204)
