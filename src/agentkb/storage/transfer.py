"""Export and import SQL over a chunk table: a consistent snapshot read in batches (a server-side cursor),
and a bulk load with binary COPY."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from sqlalchemy import Row, text
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.errors import BadRequest
from agentkb.storage.chunks import ChunkWrite

COLUMNS = ("chunk_id", "doc_id", "content", "content_hash", "metadata", "embedding")
COPY_TYPES = ("text", "text", "text", "text", "jsonb", "vector")


async def snapshot(conn: AsyncConnection) -> None:
    """Make the caller's (new) transaction one read-only snapshot: the definition, the counts and every
    chunk read in it agree, whatever is written meanwhile."""
    await conn.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"))


async def chunk_batches(conn: AsyncConnection, table: str, batch: int) -> AsyncIterator[Sequence[Row[Any]]]:
    """Every chunk of `table`, by document then chunk id, `batch` rows at a time (a server-side cursor:
    the table is never held in memory)."""
    result = await conn.stream(
        text(f"SELECT {', '.join(COLUMNS)} FROM {table} ORDER BY doc_id, chunk_id").execution_options(
            yield_per=batch
        )
    )
    async for rows in result.partitions(batch):
        yield rows


async def copy_chunks(conn: AsyncConnection, table: str, records: Sequence[ChunkWrite]) -> None:
    """Append `records` to `table` with binary COPY, in the caller's transaction. A chunk id given twice
    (or already stored) is a 400: the caller's transaction is then rolled back."""
    if not records:
        return
    raw = await conn.get_raw_connection()
    driver: psycopg.AsyncConnection[Any] = raw.driver_connection  # type: ignore[assignment]
    statement = f"COPY {table} ({', '.join(COLUMNS)}) FROM STDIN (FORMAT BINARY)"
    try:
        async with driver.cursor() as cur, cur.copy(statement) as copy:
            copy.set_types(list(COPY_TYPES))
            for r in records:
                await copy.write_row(
                    (r.chunk_id, r.doc_id, r.content, r.content_hash, Jsonb(r.metadata), r.embedding)
                )
    except psycopg.errors.UniqueViolation as exc:
        raise BadRequest(
            f"The file holds the chunk id {_key(exc)} more than once", title="Invalid export file"
        ) from exc


def _key(exc: psycopg.errors.UniqueViolation) -> str:
    detail = exc.diag.message_detail or ""
    return detail.removeprefix("Key (chunk_id)=").split(" already exists")[0] or "(unknown)"
