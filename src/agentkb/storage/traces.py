"""Agent run traces (`agent_traces`, migration 0003): one row per run, written when the run ends."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Column, DateTime, ForeignKey, Table, Text, select
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.storage.schema import metadata

agent_traces = Table(
    "agent_traces",
    metadata,
    Column("trace_id", Text, primary_key=True),
    Column("agent_id", BigInteger, ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
    Column("project_id", BigInteger, nullable=False),
    Column("question", Text, nullable=False),
    Column("answer", Text, nullable=True),
    Column("status", Text, nullable=False),
    Column("error", Text, nullable=True),
    Column("steps", JSONB, nullable=False),
    Column("usage", JSONB, nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
)


async def insert(conn: AsyncConnection, values: dict[str, Any]) -> None:
    """Store a trace; storing the same trace id again replaces it."""
    stmt = pg_insert(agent_traces).values(**values)
    update = {k: stmt.excluded[k] for k in values if k != "trace_id"}
    await conn.execute(stmt.on_conflict_do_update(index_elements=["trace_id"], set_=update))


def _upsert_all_columns() -> Any:
    stmt = pg_insert(agent_traces)
    update = {c.name: stmt.excluded[c.name] for c in agent_traces.c if c.name != "trace_id"}
    return stmt.on_conflict_do_update(index_elements=["trace_id"], set_=update)


_UPSERT = _upsert_all_columns()  # built once (and compiled once): every run stores a trace


async def insert_many(conn: AsyncConnection, records: list[dict[str, Any]]) -> None:
    """Store traces (each with every column) in one statement (SQLAlchemy sends the rows as one
    multi-row INSERT); a trace id stored before is replaced."""
    if not records:
        return
    await conn.execute(_UPSERT, records)


async def get(conn: AsyncConnection, agent_id: int, trace_id: str) -> dict[str, Any] | None:
    stmt = select(agent_traces).where(
        agent_traces.c.trace_id == trace_id, agent_traces.c.agent_id == agent_id
    )
    row = (await conn.execute(stmt)).mappings().first()
    return dict(row) if row else None
