"""A chunk table's vector index for bulk writes: HNSW over the rows up to a watermark, an exact delta above it.

Every chunk row carries `seq` (from the table's own sequence; an upsert takes a new one). The HNSW index is
partial, `WHERE seq <= W`, where W (the watermark) is kept in `chunk_vector_indexes`: a written row lands
above W, outside the index, so an insert costs no HNSW maintenance. A vector search reads the index for
`seq <= W` and scans the delta (`seq > W`, btree on `seq`) exactly, so results are complete at any W; W only
decides how much is scanned exactly.

Merges (`service.ingest.vector_merge`) move the delta under the index: a rebuild (`CREATE INDEX CONCURRENTLY ...
WHERE seq <= max(seq)`, swapped for the old index in one short transaction) when the delta is large relative
to the indexed rows, else an incremental merge (delta rows re-numbered to `seq = 0`, entering the index row
by row, in small transactions). Readers never wait for a build; W is read through a short cache, and a
stale (lower) W is still correct: the newer index's predicate is implied, and more rows are scanned exactly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

MAX_VECTOR_INDEX_DIM = 2000  # pgvector indexes `vector` up to 2,000 dimensions, `halfvec` up to 4,000
HNSW_OPTIONS = ("m", "ef_construction")
STATE = "chunk_vector_indexes"
MERGE_LOCK_CLASS = 7_340_033  # advisory locks of a table's merges and rebuilds (key 2: hashtext(table))
CACHE_S = 2.0  # how long a process trusts a watermark it read (a stale one is correct, only slower)
BUILD_MEMORY = "256MB"  # the least `maintenance_work_mem` an HNSW build gets
_cache: dict[str, tuple[int, float]] = {}


def vector_expr(dim: int) -> str:
    """The indexed expression: the vector itself, or its half-precision cast above 2,000 dimensions."""
    return "embedding" if dim <= MAX_VECTOR_INDEX_DIM else f"(embedding::halfvec({dim}))"


def distance_ops(dim: int) -> str:
    return "vector_cosine_ops" if dim <= MAX_VECTOR_INDEX_DIM else "halfvec_cosine_ops"


def index_name(table: str) -> str:
    return f"{table}_hnsw"


def build_memory_sql(*, local: bool) -> str:
    """`maintenance_work_mem` raised to `BUILD_MEMORY` for an HNSW build, never lowered: pgvector builds the
    graph in memory while it fits (row by row on disk after, far slower), so a larger setting (the server's,
    an operator's `ALTER SYSTEM` or `ALTER ROLE` for a large knowledge base) is kept. `local`: for the
    transaction only (`SET LOCAL`), else for the session."""
    return (
        f"SELECT set_config('maintenance_work_mem', '{BUILD_MEMORY}', {str(local).lower()}) "
        f"WHERE pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes('{BUILD_MEMORY}')"
    )


def hnsw_sql(
    table: str,
    dim: int,
    watermark: int,
    options: Mapping[str, int] | None = None,
    *,
    name: str = "",
    concurrently: bool = False,
) -> str:
    """`options`: pgvector's HNSW build parameters `m` and `ef_construction` (pgvector's defaults if absent)."""
    given = {k: int(v) for k, v in (options or {}).items() if k in HNSW_OPTIONS}
    storage = f" WITH ({', '.join(f'{k} = {v}' for k, v in given.items())})" if given else ""
    create = "CREATE INDEX CONCURRENTLY" if concurrently else "CREATE INDEX"
    return (
        f"{create} {name or index_name(table)} ON {table} USING hnsw ({vector_expr(dim)} {distance_ops(dim)})"
        f"{storage} WHERE seq <= {int(watermark)}"
    )


def forget(table: str) -> None:
    _cache.pop(table, None)


async def watermark(conn: AsyncConnection, table: str) -> int:
    """W: rows with `seq <= W` are in the HNSW index (cached for `CACHE_S`)."""
    cached = _cache.get(table)
    now = time.monotonic()
    if cached is not None and now - cached[1] < CACHE_S:
        return cached[0]
    value = await conn.scalar(text(f"SELECT indexed_seq FROM {STATE} WHERE storage_table = :t"), {"t": table})
    mark = int(value or 0)
    _cache[table] = (mark, now)
    return mark


async def set_watermark(conn: AsyncConnection, table: str, mark: int) -> None:
    await conn.execute(
        text(
            f"INSERT INTO {STATE} (storage_table, indexed_seq) VALUES (:t, :w) "
            "ON CONFLICT (storage_table) DO UPDATE SET indexed_seq = EXCLUDED.indexed_seq"
        ),
        {"t": table, "w": mark},
    )
    _cache[table] = (mark, time.monotonic())


async def forget_table(conn: AsyncConnection, table: str) -> None:
    """The chunk table is dropped (or made again): its watermark goes with it."""
    await conn.execute(text(f"DELETE FROM {STATE} WHERE storage_table = :t"), {"t": table})
    forget(table)


async def try_merge_lock(conn: AsyncConnection, table: str) -> bool:
    """Take the table's merge lock (session-level) if no one holds it; whether it was taken."""
    key = {"c": MERGE_LOCK_CLASS, "t": table}
    return bool(await conn.scalar(text("SELECT pg_try_advisory_lock(:c, hashtext(:t))"), key))


async def merge_unlock(conn: AsyncConnection, table: str) -> None:
    await conn.execute(
        text("SELECT pg_advisory_unlock(:c, hashtext(:t))"), {"c": MERGE_LOCK_CLASS, "t": table}
    )


@asynccontextmanager
async def merge_lock(conn: AsyncConnection, table: str, poll_s: float = 0.05) -> AsyncIterator[None]:
    """The table's merge lock (the one background merges take) on an autocommit connection, for an explicit
    rebuild: a merge running meanwhile is waited for (else its swap, which drops the table's other HNSW
    indexes, would replace the new index with one built as asked before), and one starting meanwhile finds
    the lock taken. Polled, not waited for in one statement: a statement waiting holds a snapshot, which the
    merge's CREATE INDEX CONCURRENTLY would wait for in turn (a deadlock)."""
    while not await try_merge_lock(conn, table):
        await asyncio.sleep(poll_s)
    try:
        yield
    finally:
        await merge_unlock(conn, table)


async def sizes(conn: AsyncConnection, table: str, mark: int) -> tuple[int, int]:
    """(rows in the delta, rows in the index) — the latter PostgreSQL's estimate, the former exact."""
    delta = int(await conn.scalar(text(f"SELECT count(*) FROM {table} WHERE seq > :w"), {"w": mark}) or 0)
    estimate = await conn.scalar(
        text("SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass(:t)"), {"t": table}
    )
    return delta, max(int(estimate or 0) - delta, 0)


async def vector_indexes(conn: AsyncConnection, table: str) -> list[str]:
    """The names of the table's HNSW indexes (valid or not)."""
    rows = await conn.execute(
        text(
            "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "JOIN pg_am a ON a.oid = i.relam WHERE x.indrelid = to_regclass(:t) AND a.amname = 'hnsw'"
        ),
        {"t": table},
    )
    return [r.relname for r in rows]


async def rebuild(conn: AsyncConnection, table: str, dim: int, options: Mapping[str, int] | None) -> None:
    """In the caller's transaction (writes and searches of the table wait): every row under a new index.
    The caller holds the table's merge lock (`merge_lock`)."""
    for name in await vector_indexes(conn, table):
        await conn.execute(text(f"DROP INDEX {name}"))
    mark = int(await conn.scalar(text(f"SELECT coalesce(max(seq), 0) FROM {table}")) or 0)
    await conn.execute(text(build_memory_sql(local=True)))
    await conn.execute(text(hnsw_sql(table, dim, mark, options)))
    await set_watermark(conn, table, mark)


async def merge_some(conn: AsyncConnection, table: str, mark: int, limit: int) -> int:
    """Incremental merge: up to `limit` delta rows renumbered under W (each enters the index); rows another
    transaction holds are left for later. The number merged."""
    result = await conn.execute(
        text(
            f"UPDATE {table} SET seq = 0 WHERE chunk_id IN (SELECT chunk_id FROM {table} WHERE seq > :w "
            "ORDER BY seq LIMIT :n FOR UPDATE SKIP LOCKED)"
        ),
        {"w": mark, "n": limit},
    )
    return int(result.rowcount or 0)
