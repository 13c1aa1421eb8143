"""Projects: the namespaces holding agents and knowledge bases."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.errors import BadRequest, Conflict, NotFound, project_not_found
from agentkb.service.platform import access
from agentkb.sql.pushdown import RESERVED_NAMES
from agentkb.storage import agents as agent_rows
from agentkb.storage import data_sources as data_source_rows
from agentkb.storage import projects as repo
from agentkb.storage.db import Database
from agentkb.storage.projects import Project
from agentkb.validation import check_name, is_identifier

T = TypeVar("T")


async def resolve(conn: AsyncConnection, name: str, *, exact: bool = False) -> Project:
    """The project named in a path, matched case-insensitively as MindsDB does (its exact spelling first);
    `exact`: spelt exactly so (MindsDB's `strict_case`). 404 if unknown."""
    project = None
    if is_identifier(name):
        project = await (repo.get_exact(conn, name) if exact else repo.get(conn, name))
    if project is None:
        raise project_not_found(name)
    return project


async def named_in_project(
    db: Database,
    project_name: str,
    name: str,
    lookup: Callable[[AsyncConnection, str, str], Awaitable[T | None]],
    not_found: Callable[[str], NotFound],
) -> T:
    """`lookup(conn, project_name, name)`: one query when both exist. When it finds nothing, a missing
    project is told (404) before a missing `name` (`not_found(name)`)."""
    async with db.read() as conn:  # autocommit: no BEGIN / ROLLBACK round trips around the lookup
        found = await lookup(conn, project_name, name) if is_identifier(name) else None
        if found is None:
            await resolve(conn, project_name)  # 404 for the project first, if that is missing
    if found is None:
        raise not_found(name)
    return found


async def rows_in_project(
    project_name: str, listing: Callable[[], Awaitable[tuple[Project | None, list[T]]]]
) -> list[T]:
    """The rows `listing()` finds with the project named `project_name` in one query (the storage modules'
    `list_in_project`); 404 when no project has that name, as `resolve` tells it (a name that is no
    identifier is not looked up)."""
    if is_identifier(project_name):
        project, rows = await listing()
        if project is not None:
            return rows
    raise project_not_found(project_name)


class ProjectService:
    def __init__(self, db: Database, default_project: str) -> None:
        self.db = db
        self.default_project = default_project

    async def ensure_default(self) -> None:
        """The default project always exists (created at start-up, by whichever process starts first)."""
        async with self.db.transaction() as conn:
            await repo.ensure(conn, self.default_project)

    async def list(self) -> list[Project]:
        """Every project (a project key: its own)."""
        async with self.db.read() as conn:
            found = await repo.list_all(conn)
        return [project for project in found if access.allowed(project.name)]

    async def get(self, name: str) -> Project:
        access.require_project(name)
        async with self.db.read() as conn:
            return await resolve(conn, name)

    async def create(self, name: object, *, keep_case: bool = False) -> Project:
        """Names are lower-cased unless `keep_case` (SQL's back-quoted names keep their case, as MindsDB's).
        One name differing only in case from another is taken: lookups are case-insensitive."""
        access.require_write("creating a project")
        access.require_global("creating a project")
        checked = check_name(name, "name")
        checked = checked if keep_case else checked.lower()
        async with self.db.transaction() as conn:
            project = None if await repo.get(conn, checked) else await repo.create(conn, checked)
        if project is None:
            raise Conflict(f"Project with name {checked} already exists", title="Project already exists")
        return project

    async def delete(self, name: str, *, exact: bool = False) -> None:
        access.require_write("deleting a project")
        access.require_global("deleting a project")
        async with self.db.transaction() as conn:
            project = await resolve(conn, name, exact=exact)
            if project.name == self.default_project:
                raise BadRequest(f"The default project {project.name} cannot be deleted")
            await repo.lock(conn, project.id)
            children = await repo.count_children(conn, project.id)
            if children:
                raise Conflict(
                    f"Project {project.name} still holds {children} agent(s) or knowledge base(s); "
                    "delete them first",
                    title="Project not empty",
                )
            await repo.delete(conn, project.id)

    async def rename(self, name: str, new_name: object, *, exact: bool = False) -> Project:
        """`ALTER DATABASE <project> NAME = '<new name>'`: MindsDB's rules (the new name in lower case; only
        the name of a project changes). Agents' `data.knowledge_bases` entries follow the new name."""
        access.require_write("renaming a project")
        access.require_global("renaming a project")
        checked = check_name(new_name, "name")
        if not checked.islower():
            raise BadRequest(f"New name must be in lower case: {checked}", title="Invalid name")
        async with self.db.transaction() as conn:
            project = await resolve(conn, name, exact=exact)
            await repo.lock(conn, project.id)
            if checked == project.name:
                return project
            if project.name == self.default_project:
                raise BadRequest(f"The default project {project.name} cannot be renamed")
            taken = await repo.get(conn, checked)
            if (taken is not None and taken.id != project.id) or await data_source_rows.get(conn, checked):
                raise Conflict(f"Database with name {checked} already exists", title="Name conflict")
            if checked in RESERVED_NAMES:
                raise Conflict(f"{checked} is a system database", title="Name conflict")
            await repo.rename(conn, project.id, checked)
            await _follow_rename(conn, project.name, checked)
            return Project(project.id, checked)


async def _follow_rename(conn: AsyncConnection, old: str, new: str) -> None:
    """Agents name knowledge bases `<project>.<kb>`: rewrite the renamed project's entries."""
    prefix = f"{old.lower()}."
    for project in await repo.list_all(conn):
        for agent in await agent_rows.list_for_project(conn, project.id):
            kbs = agent.data.get("knowledge_bases") or []
            renamed = [f"{new}.{e[len(prefix) :]}" if e.lower().startswith(prefix) else e for e in kbs]
            if renamed != kbs:
                await agent_rows.update(conn, agent.id, {"data": {**agent.data, "knowledge_bases": renamed}})
