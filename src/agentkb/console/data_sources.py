"""Data sources in the console: the list, registering one (its connection tested first, unless asked not
to), one data source's page, testing its connection, and listing its tables."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Form, Request, Response

from agentkb.console import forms
from agentkb.console.render import ConsoleRoute, page, see_other, services_of
from agentkb.console.session import PREFIX, check_csrf
from agentkb.errors import AgentKBError
from agentkb.service.catalog import fit_to_show
from agentkb.service.types import SUPPORTED_ENGINES, DataSourceRow

router = APIRouter(prefix=f"{PREFIX}/data_sources", route_class=ConsoleRoute)
FIELDS = ("host", "port", "user", "password", "database", "schema", "db_file")


def shown(row: DataSourceRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "engine": row.engine,
        "parameters": fit_to_show(row).parameters,
        "updated_at": row.updated_at,
    }


@router.get("")
async def list_sources(request: Request) -> Response:
    rows = await services_of(request).data_sources.list()
    return await page(
        request,
        "data_sources.html",
        section="data",
        sources=[shown(r) for r in rows],
        engines=SUPPORTED_ENGINES,
    )


@router.post("", dependencies=[Depends(check_csrf)])
async def register(
    request: Request,
    name: str = Form(""),
    engine: str = Form(""),
    host: str = Form(""),
    port: str = Form(""),
    user: str = Form(""),
    password: str = Form(""),
    database: str = Form(""),
    db_schema: str = Form("", alias="schema"),
    db_file: str = Form(""),
    extra: str = Form(""),
    skip_check: str = Form(""),
) -> Response:
    """Register a data source; its connection is tested first (400 with the driver's reason) unless
    `skip_check` is ticked."""
    given = {"host": host, "port": port, "user": user, "password": password, "database": database}
    given |= {"schema": db_schema, "db_file": db_file}
    parameters: dict[str, Any] = {k: v.strip() for k, v in given.items() if v.strip()}
    if "port" in parameters:
        parameters["port"] = forms.integer(parameters["port"], "Port", minimum=1)
    parameters |= forms.json_object(extra, "Other parameters") or {}
    row = await services_of(request).data_sources.create(
        forms.text(name), forms.text(engine), parameters, keep_case=True, check_connection=not skip_check
    )
    return see_other(f"{PREFIX}/data_sources/{row.name}")


async def _source_page(request: Request, name: str, **context: Any) -> Response:
    row = await services_of(request).data_sources.get(name)
    return await page(request, "data_source.html", section="data", source=shown(row), **context)


@router.get("/{name}")
async def source_page(request: Request, name: str) -> Response:
    return await _source_page(request, name, tested=None, tables=None)


@router.post("/{name}/test", dependencies=[Depends(check_csrf)])
async def test_source(request: Request, name: str) -> Response:
    """Connect with the stored parameters (the data sources service's check, as for a register)."""
    services = services_of(request)
    row = await services.data_sources.get(name)
    try:
        await services.data_sources.put(row.name, None, None, check_connection=True)
    except AgentKBError as exc:
        return await _source_page(request, name, tested=(False, exc.detail), tables=None, status=200)
    return await _source_page(request, name, tested=(True, "The connection works"), tables=None)


@router.get("/{name}/tables")
async def tables(request: Request, name: str) -> Response:
    """The data source's tables (`SHOW TABLES FROM <name>` through the SQL service)."""
    services = services_of(request)
    row = await services.data_sources.get(name)
    quoted = row.name.replace("`", "``")
    result = await services.sql.execute(f"SHOW TABLES FROM `{quoted}`", "mindsdb")
    names = [str(r[0]) for r in result.data]
    return await _source_page(request, name, tested=None, tables=names)


@router.post("/{name}/delete", dependencies=[Depends(check_csrf)])
async def delete_source(request: Request, name: str) -> Response:
    await services_of(request).data_sources.delete(name)
    return see_other(f"{PREFIX}/data_sources")
