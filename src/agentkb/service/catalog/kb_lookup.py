"""The one look-up of a knowledge base by name, which every service uses: the project matched
case-insensitively (its exact spelling first, as `projects.resolve`), the caller's scope checked, a missing
project told (404) before a missing knowledge base (`errors.kb_not_found`). The search service keeps the
rows it finds in a per-process cache (`SearchService.cached_knowledge_base`), validated by each search."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.errors import kb_not_found
from agentkb.service.catalog import projects
from agentkb.service.platform import access
from agentkb.storage import knowledge_bases as repo
from agentkb.storage.db import Database
from agentkb.storage.knowledge_bases import KnowledgeBaseRow
from agentkb.validation import is_identifier


async def find(
    conn: AsyncConnection, project_name: str, kb_name: str, *, for_update: bool = False
) -> KnowledgeBaseRow:
    """The knowledge base `kb_name` of the project `project_name`, read on `conn`; `for_update`: its row
    locked until `conn`'s transaction ends (without it, one round trip when both exist)."""
    access.require_project(project_name)
    kb: KnowledgeBaseRow | None = None
    if for_update:
        project = await projects.resolve(conn, project_name)
        if is_identifier(kb_name):
            kb = await repo.get(conn, project.id, kb_name, for_update=True)
    else:
        if is_identifier(kb_name):
            kb = await repo.get_in_project(conn, project_name, kb_name)
        if kb is None:
            await projects.resolve(conn, project_name)  # 404 for the project first, if that is missing
    if kb is None:
        raise kb_not_found(kb_name)
    return kb


async def read(db: Database, project_name: str, kb_name: str) -> KnowledgeBaseRow:
    """`find` on a connection of its own (autocommit: no BEGIN / ROLLBACK round trips around it)."""
    async with db.read() as conn:
        return await find(conn, project_name, kb_name)
