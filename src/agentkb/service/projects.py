"""Projects: the namespaces holding agents and knowledge bases."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.errors import BadRequest, Conflict, project_not_found
from agentkb.storage import projects as repo
from agentkb.storage.db import Database
from agentkb.storage.projects import Project
from agentkb.validation import check_name, is_identifier


async def resolve(conn: AsyncConnection, name: str) -> Project:
    """The project named in a path, matched case-insensitively as MindsDB does; 404 if unknown."""
    project = await repo.get(conn, name.lower()) if is_identifier(name) else None
    if project is None:
        raise project_not_found(name)
    return project


class ProjectService:
    def __init__(self, db: Database, default_project: str) -> None:
        self.db = db
        self.default_project = default_project

    async def ensure_default(self) -> None:
        """The default project always exists (created at start-up, by whichever process starts first)."""
        async with self.db.transaction() as conn:
            await repo.ensure(conn, self.default_project)

    async def list(self) -> list[Project]:
        async with self.db.connect() as conn:
            return await repo.list_all(conn)

    async def get(self, name: str) -> Project:
        async with self.db.connect() as conn:
            return await resolve(conn, name)

    async def create(self, name: object) -> Project:
        checked = check_name(name, "name").lower()
        async with self.db.transaction() as conn:
            project = await repo.create(conn, checked)
        if project is None:
            raise Conflict(f"Project with name {checked} already exists", title="Project already exists")
        return project

    async def delete(self, name: str) -> None:
        async with self.db.transaction() as conn:
            project = await resolve(conn, name)
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
