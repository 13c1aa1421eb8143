"""Agent rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import RowMapping, bindparam, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.storage.db import fetch_tuples
from agentkb.storage.projects import BY_NAME_SQL, Project, by_name_params
from agentkb.storage.schema import agents


@dataclass(frozen=True, slots=True)
class AgentRow:
    id: int
    project_id: int
    name: str
    model: dict[str, Any]
    data: dict[str, Any]
    prompt_template: str | None
    params: dict[str, Any]
    created_at: datetime
    updated_at: datetime


def _row(r: RowMapping) -> AgentRow:
    return AgentRow(**{k: r[k] for k in AgentRow.__slots__})


# built once: listing a project's agents and reading one by name are the common requests
_LIST = select(agents).where(agents.c.project_id == bindparam("project_id")).order_by(agents.c.id)
_GET = select(agents).where(
    agents.c.project_id == bindparam("project_id"), agents.c.name == bindparam("name")
)
_GET_FOR_UPDATE = _GET.with_for_update()


async def list_for_project(conn: AsyncConnection, project_id: int) -> list[AgentRow]:
    rows = await conn.execute(_LIST, {"project_id": project_id})
    return [_row(r) for r in rows.mappings()]


# the project as `projects.get` finds it (case-insensitive, its exact spelling first), then its agents by id:
# a project without agents gives one row of NULL agent columns, an unknown project none
_COLUMNS = ", ".join(f"a.{c}" for c in AgentRow.__slots__)
_LIST_IN_PROJECT = (
    f"SELECT p.id, p.name, {_COLUMNS} FROM ({BY_NAME_SQL}) p "
    "LEFT JOIN agents a ON a.project_id = p.id ORDER BY a.id"
)


async def list_in_project(conn: AsyncConnection, project_name: str) -> tuple[Project | None, list[AgentRow]]:
    """One round trip, for the most common request (`GET …/agents`): the project named `project_name` as
    `projects.get` matches it, and its agents in creation order; (None, []) when no project has that name."""
    rows = await fetch_tuples(conn, _LIST_IN_PROJECT, by_name_params(project_name))
    if not rows:
        return None, []
    project = Project(rows[0][0], rows[0][1])
    return project, [AgentRow(*row[2:]) for row in rows if row[2] is not None]


async def get(
    conn: AsyncConnection, project_id: int, name: str, *, for_update: bool = False
) -> AgentRow | None:
    stmt = _GET_FOR_UPDATE if for_update else _GET
    row = (await conn.execute(stmt, {"project_id": project_id, "name": name})).mappings().first()
    return _row(row) if row else None


# every agent run and GET of an agent looks it up by name: the project found as `projects.get` finds it (its
# exact spelling, else its case-insensitive match: the listings' `BY_NAME_SQL`), then the agent in that
# project alone, on the driver connection (`fetch_tuples`)
_IN_PROJECT = (
    f"SELECT {_COLUMNS} FROM ({BY_NAME_SQL}) p JOIN agents a ON a.project_id = p.id WHERE a.name = :row_name"
)


async def get_in_project(conn: AsyncConnection, project_name: str, name: str) -> AgentRow | None:
    """One round trip: the agent `name` of the project named `project_name`, the project found as
    `projects.get` and `list_in_project` find it (None when that project has no such agent, whatever another
    spelling of the name holds)."""
    params = {**by_name_params(project_name), "row_name": name}
    rows = await fetch_tuples(conn, _IN_PROJECT, params)
    return AgentRow(*rows[0]) if rows else None


async def insert_new(conn: AsyncConnection, project_id: int, values: dict[str, Any]) -> AgentRow | None:
    """Insert; None if the name is taken in the project (the unique constraint decides, race-free)."""
    stmt = (
        insert(agents)
        .values(project_id=project_id, **values)
        .on_conflict_do_nothing(constraint="agents_project_name_key")
        .returning(*agents.c)
    )
    row = (await conn.execute(stmt)).mappings().first()
    return _row(row) if row else None


async def update(conn: AsyncConnection, agent_id: int, values: dict[str, Any]) -> AgentRow:
    stmt = (
        agents.update()
        .where(agents.c.id == agent_id)
        .values(**values, updated_at=func.now())
        .returning(*agents.c)
    )
    return _row((await conn.execute(stmt)).mappings().one())


async def delete(conn: AsyncConnection, agent_id: int) -> None:
    await conn.execute(agents.delete().where(agents.c.id == agent_id))
