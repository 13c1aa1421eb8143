"""Project rows."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import bindparam, func, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.storage.schema import agents, knowledge_bases, projects


@dataclass(frozen=True, slots=True)
class Project:
    id: int
    name: str


async def ensure(conn: AsyncConnection, name: str) -> None:
    await conn.execute(insert(projects).values(name=name).on_conflict_do_nothing(index_elements=["name"]))


async def list_all(conn: AsyncConnection) -> list[Project]:
    rows = await conn.execute(select(projects.c.id, projects.c.name).order_by(projects.c.id))
    return [Project(r.id, r.name) for r in rows]


# built once: every project-scoped request resolves its project (building a statement costs more than
# running it through SQLAlchemy's compiled cache)
_BY_NAME = (
    select(projects.c.id, projects.c.name)
    .where(func.lower(projects.c.name) == bindparam("lower"))
    .order_by((projects.c.name == bindparam("name")).desc(), projects.c.id)
    .limit(1)
)
_EXACT = select(projects.c.id, projects.c.name).where(projects.c.name == bindparam("name"))


# the project `get` finds, as one row (id, name) for statements that read a project's rows in the same round
# trip (`agents.list_in_project`, `knowledge_bases.list_in_project`); its parameters: `by_name_params`
BY_NAME_SQL = (
    "SELECT id, name FROM projects WHERE lower(name) = :lower ORDER BY (name = :name) DESC, id LIMIT 1"
)


def by_name_params(name: str) -> dict[str, str]:
    return {"lower": name.lower(), "name": name}


async def get(conn: AsyncConnection, name: str) -> Project | None:
    """The project spelt `name` exactly, else its case-insensitive match (MindsDB's default lookup)."""
    row = (await conn.execute(_BY_NAME, by_name_params(name))).first()
    return Project(row.id, row.name) if row else None


async def get_exact(conn: AsyncConnection, name: str) -> Project | None:
    """The project spelt exactly `name` (MindsDB's `strict_case`: DROP / ALTER DATABASE)."""
    row = (await conn.execute(_EXACT, {"name": name})).first()
    return Project(row.id, row.name) if row else None


async def rename(conn: AsyncConnection, project_id: int, new_name: str) -> None:
    await conn.execute(projects.update().where(projects.c.id == project_id).values(name=new_name))


async def create(conn: AsyncConnection, name: str) -> Project | None:
    """Insert; None if the name is taken."""
    stmt = (
        insert(projects)
        .values(name=name)
        .on_conflict_do_nothing(index_elements=["name"])
        .returning(projects.c.id, projects.c.name)
    )
    row = (await conn.execute(stmt)).first()
    return Project(row.id, row.name) if row else None


async def lock(conn: AsyncConnection, project_id: int) -> None:
    """Row lock: serialises deleting a project against creating things in it."""
    await conn.execute(text("SELECT 1 FROM projects WHERE id = :id FOR UPDATE"), {"id": project_id})


async def count_children(conn: AsyncConnection, project_id: int) -> int:
    n_agents = await conn.scalar(select(func.count()).where(agents.c.project_id == project_id))
    n_kbs = await conn.scalar(select(func.count()).where(knowledge_bases.c.project_id == project_id))
    return int(n_agents or 0) + int(n_kbs or 0)


async def delete(conn: AsyncConnection, project_id: int) -> None:
    await conn.execute(projects.delete().where(projects.c.id == project_id))
