"""The JSON columns that hold secrets (sealed by `secrecy.SecretBox`), read and rewritten row by row.

`service/platform/secrets.py` uses them to seal values still stored in plain text (start-up) and to re-encrypt
every secret under a new key (`agentkb keys rotate-secret`). `updated_at` is left alone: the records'
content does not change.
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

SECRET_COLUMNS: dict[str, tuple[str, ...]] = {
    "agents": ("model", "params"),
    "knowledge_bases": ("embedding_model", "reranking_model", "params"),
    "data_sources": ("parameters",),
    "ingest_jobs": ("request",),  # an insert's `params` may carry an embedding or reranking model
}
_WHERE = {"ingest_jobs": "WHERE jsonb_exists(request, 'params')"}


async def rows_for_update(
    conn: AsyncConnection, table: str, *, skip_locked: bool = False
) -> list[tuple[Any, dict[str, Any]]]:
    """`(id, {column: value})` of every row of `table` (one of `SECRET_COLUMNS`), locked for update;
    `skip_locked` passes over rows another transaction holds."""
    columns = SECRET_COLUMNS[table]
    lock = "FOR UPDATE SKIP LOCKED" if skip_locked else "FOR UPDATE"
    result = await conn.execute(
        text(f"SELECT id, {', '.join(columns)} FROM {table} {_WHERE.get(table, '')} ORDER BY id {lock}")
    )
    return [(row["id"], {c: row[c] for c in columns}) for row in result.mappings()]


async def update_row(conn: AsyncConnection, table: str, row_id: Any, values: dict[str, Any]) -> None:
    """Set JSON `values` (columns of `SECRET_COLUMNS[table]`) on one row."""
    allowed = SECRET_COLUMNS[table]
    assignments = []
    params: dict[str, Any] = {"id": row_id}
    for index, (column, value) in enumerate(values.items()):
        if column not in allowed:
            raise ValueError(f"{table}.{column} is not a secret column")
        assignments.append(f"{column} = CAST(:v{index} AS jsonb)")
        params[f"v{index}"] = None if value is None else orjson.dumps(value).decode()
    if assignments:
        await conn.execute(text(f"UPDATE {table} SET {', '.join(assignments)} WHERE id = :id"), params)
