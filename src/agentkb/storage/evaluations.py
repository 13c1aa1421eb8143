"""Knowledge-base evaluation runs (`kb_evaluations`, migration 0010): one row per `EVALUATE KNOWLEDGE_BASE`
that evaluated, with its summary metrics and per-question results; removed with their knowledge base."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Column, DateTime, ForeignKey, Index, Table, Text, func, select
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.storage.schema import metadata

kb_evaluations = Table(
    "kb_evaluations",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column(
        "knowledge_base_id",
        BigInteger,
        ForeignKey("knowledge_bases.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("version", Text, nullable=False),
    Column("test_table", Text, nullable=True),
    Column("params", JSONB, nullable=False),
    Column("metrics", JSONB, nullable=False),
    Column("results", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("kb_evaluations_kb_created", "knowledge_base_id", "created_at"),
)


@dataclass(frozen=True, slots=True)
class EvaluationRow:
    id: int
    knowledge_base_id: int
    version: str
    test_table: str | None
    params: dict[str, Any]
    metrics: dict[str, Any]
    results: list[dict[str, Any]] | None  # None when listed without them
    created_at: datetime


def _row(r: Any, with_results: bool) -> EvaluationRow:
    return EvaluationRow(
        id=r["id"],
        knowledge_base_id=r["knowledge_base_id"],
        version=r["version"],
        test_table=r["test_table"],
        params=r["params"],
        metrics=r["metrics"],
        results=r["results"] if with_results else None,
        created_at=r["created_at"],
    )


async def insert(conn: AsyncConnection, values: dict[str, Any]) -> EvaluationRow:
    row = (await conn.execute(kb_evaluations.insert().values(**values).returning(kb_evaluations))).mappings()
    return _row(row.one(), True)


async def list_for_kb(conn: AsyncConnection, kb_id: int, limit: int) -> list[EvaluationRow]:
    """The KB's runs, newest first, without their per-question results."""
    columns = [c for c in kb_evaluations.c if c.name != "results"]
    stmt = (
        select(*columns)
        .where(kb_evaluations.c.knowledge_base_id == kb_id)
        .order_by(kb_evaluations.c.id.desc())
        .limit(limit)
    )
    return [_row(r, False) for r in (await conn.execute(stmt)).mappings()]


async def get(conn: AsyncConnection, kb_id: int, run_id: int) -> EvaluationRow | None:
    stmt = select(kb_evaluations).where(
        kb_evaluations.c.knowledge_base_id == kb_id, kb_evaluations.c.id == run_id
    )
    row = (await conn.execute(stmt)).mappings().first()
    return _row(row, True) if row else None
