"""Knowledge-base rows (the records; their chunks live in `chunks`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import RowMapping, Select, bindparam, func, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.storage.db import fetch_tuples
from agentkb.storage.projects import BY_NAME_SQL, Project, by_name_params
from agentkb.storage.schema import knowledge_bases as kbs
from agentkb.storage.schema import projects


@dataclass(frozen=True, slots=True)
class KnowledgeBaseRow:
    id: int
    project_id: int
    project_name: str
    name: str
    embedding_model: dict[str, Any]
    reranking_model: dict[str, Any] | None
    metadata_columns: list[str] | None
    content_columns: list[str] | None
    id_column: str | None
    params: dict[str, Any]
    storage_table: str
    vector_dim: int
    created_at: datetime
    updated_at: datetime  # moved by every change of the KB
    content_version: datetime  # moved only when its chunks change (see `update`)


def _row(r: RowMapping) -> KnowledgeBaseRow:
    return KnowledgeBaseRow(**{k: r[k] for k in KnowledgeBaseRow.__slots__})


def _select() -> Select[Any]:
    return select(kbs, projects.c.name.label("project_name")).join(
        projects, projects.c.id == kbs.c.project_id
    )


# built once (building a statement costs more than running it through SQLAlchemy's compiled cache)
_GET = _select().where(kbs.c.project_id == bindparam("project_id"), kbs.c.name == bindparam("name"))
_GET_FOR_UPDATE = _GET.with_for_update(of=kbs)
_BY_ID = _select().where(kbs.c.id == bindparam("kb_id"))
_BY_ID_FOR_UPDATE = _BY_ID.with_for_update(of=kbs)


# the project as `projects.get` finds it (case-insensitive, its exact spelling first), then its KBs by id: a
# project without KBs gives one row of NULL KB columns, an unknown project none
_COLUMNS = ", ".join("p.name" if c == "project_name" else f"k.{c}" for c in KnowledgeBaseRow.__slots__)
_LIST_IN_PROJECT = (
    f"SELECT p.id, {_COLUMNS} FROM ({BY_NAME_SQL}) p "
    "LEFT JOIN knowledge_bases k ON k.project_id = p.id ORDER BY k.id"
)


async def list_in_project(
    conn: AsyncConnection, project_name: str
) -> tuple[Project | None, list[KnowledgeBaseRow]]:
    """One round trip, for the common listing (`GET …/knowledge_bases`, the SDKs' `list()`): the project named
    `project_name` as `projects.get` matches it, and its KBs in creation order; (None, []) when no project
    has that name."""
    rows = await fetch_tuples(conn, _LIST_IN_PROJECT, by_name_params(project_name))
    if not rows:
        return None, []
    project = Project(rows[0][0], rows[0][2])
    return project, [KnowledgeBaseRow(*row[1:]) for row in rows if row[1] is not None]


async def get(
    conn: AsyncConnection, project_id: int, name: str, *, for_update: bool = False
) -> KnowledgeBaseRow | None:
    stmt = _GET_FOR_UPDATE if for_update else _GET
    row = (await conn.execute(stmt, {"project_id": project_id, "name": name})).mappings().first()
    return _row(row) if row else None


# agent runs, searches and GETs look KBs up by name: the project found as `projects.get` finds it (its exact
# spelling, else its case-insensitive match: the listings' `BY_NAME_SQL`), then the KB in that project alone,
# on the driver connection (`fetch_tuples`)
_IN_PROJECT = (
    f"SELECT {_COLUMNS} FROM ({BY_NAME_SQL}) p JOIN knowledge_bases k ON k.project_id = p.id "
    "WHERE k.name = :row_name"
)


async def get_in_project(conn: AsyncConnection, project_name: str, name: str) -> KnowledgeBaseRow | None:
    """One round trip for the hot path: the KB `name` of the project named `project_name`, the project found
    as `projects.get` and `list_in_project` find it (None when that project has no such KB, whatever another
    spelling of the name holds)."""
    params = {**by_name_params(project_name), "row_name": name}
    rows = await fetch_tuples(conn, _IN_PROJECT, params)
    return KnowledgeBaseRow(*rows[0]) if rows else None


async def get_by_id(
    conn: AsyncConnection, kb_id: int, *, for_update: bool = False
) -> KnowledgeBaseRow | None:
    stmt = _BY_ID_FOR_UPDATE if for_update else _BY_ID
    row = (await conn.execute(stmt, {"kb_id": kb_id})).mappings().first()
    return _row(row) if row else None


async def next_id(conn: AsyncConnection) -> int:
    value = await conn.scalar(text("SELECT nextval(pg_get_serial_sequence('knowledge_bases', 'id'))"))
    return int(value)


async def insert_new(conn: AsyncConnection, values: dict[str, Any]) -> bool:
    """Insert; False if the name is taken in the project (the unique constraint decides, race-free)."""
    stmt = (
        insert(kbs)
        .values(**values)
        .on_conflict_do_nothing(constraint="knowledge_bases_project_name_key")
        .returning(kbs.c.id)
    )
    return (await conn.execute(stmt)).first() is not None


async def update(conn: AsyncConnection, kb_id: int, values: dict[str, Any], *, content: bool) -> None:
    """Set `values` and move `updated_at`; `content`: the change wrote or deleted chunks (an insert, a delete
    of documents, an UPDATE of a chunk), which moves `content_version` too: the caches built from the chunks
    alone (BM25) are keyed by it, so a change of settings keeps them."""
    moved = {"updated_at": func.now(), **({"content_version": func.now()} if content else {})}
    await conn.execute(kbs.update().where(kbs.c.id == kb_id).values(**values, **moved))


async def delete(conn: AsyncConnection, kb_id: int) -> None:
    await conn.execute(kbs.delete().where(kbs.c.id == kb_id))
