"""Data-source rows: name, engine and connection parameters of each external database.

The table joins the shared `metadata` of `storage.schema`; migration 0002 creates it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Column, DateTime, RowMapping, Table, Text, func, select
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.storage.schema import metadata

data_sources = Table(
    "data_sources",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("name", Text, nullable=False, unique=True),
    Column("engine", Text, nullable=False),
    Column("parameters", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)


@dataclass(frozen=True, slots=True)
class DataSourceRow:
    id: int
    name: str
    engine: str
    parameters: dict[str, Any]
    created_at: datetime
    updated_at: datetime


def _row(r: RowMapping) -> DataSourceRow:
    return DataSourceRow(**{k: r[k] for k in DataSourceRow.__slots__})


async def list_all(conn: AsyncConnection) -> list[DataSourceRow]:
    rows = await conn.execute(select(data_sources).order_by(data_sources.c.id))
    return [_row(r) for r in rows.mappings()]


async def get(conn: AsyncConnection, name: str) -> DataSourceRow | None:
    """The data source spelt `name` exactly, else its case-insensitive match (MindsDB's default lookup)."""
    stmt = (
        select(data_sources)
        .where(func.lower(data_sources.c.name) == name.lower())
        .order_by((data_sources.c.name == name).desc(), data_sources.c.id)
        .limit(1)
    )
    row = (await conn.execute(stmt)).mappings().first()
    return _row(row) if row else None


async def get_exact(conn: AsyncConnection, name: str) -> DataSourceRow | None:
    """The data source spelt exactly `name` (MindsDB's `strict_case`: DROP DATABASE)."""
    row = (await conn.execute(select(data_sources).where(data_sources.c.name == name))).mappings().first()
    return _row(row) if row else None


async def insert_new(
    conn: AsyncConnection, name: str, engine: str, parameters: dict[str, Any]
) -> DataSourceRow | None:
    """Insert; None if the name is taken (the unique constraint decides, race-free)."""
    stmt = (
        insert(data_sources)
        .values(name=name, engine=engine, parameters=parameters)
        .on_conflict_do_nothing(index_elements=["name"])
        .returning(*data_sources.c)
    )
    row = (await conn.execute(stmt)).mappings().first()
    return _row(row) if row else None


async def delete(conn: AsyncConnection, name: str) -> bool:
    """Delete by name; False if there was no such row."""
    result = await conn.execute(
        data_sources.delete().where(data_sources.c.name == name).returning(data_sources.c.id)
    )
    return result.first() is not None


async def update_parameters(
    conn: AsyncConnection, name: str, parameters: dict[str, Any]
) -> DataSourceRow | None:
    """Replace a data source's parameters; None if there is no such row."""
    stmt = (
        data_sources.update()
        .where(data_sources.c.name == name)
        .values(parameters=parameters, updated_at=func.now())
        .returning(*data_sources.c)
    )
    row = (await conn.execute(stmt)).mappings().first()
    return _row(row) if row else None
