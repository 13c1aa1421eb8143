"""New chunks go in with binary COPY written whole by `storage.chunks.copy_new_chunks` (PostgreSQL's binary
format, pgvector's vectors): what is read back is exactly what was written. Real PostgreSQL + pgvector."""

from __future__ import annotations

from typing import Any

import numpy as np
from pgvector import Vector
from sqlalchemy import text

from agentkb.storage import chunks
from agentkb.storage.db import Database

DIM = 5


async def test_copied_chunks_read_back_as_written(served: Any, pg_url: str, unique: str) -> None:
    db = Database(pg_url, pool_size=1)
    table = f"kb_chunks_copy_{unique}"
    rng = np.random.default_rng(7)
    writes = [
        chunks.ChunkWrite(
            f"doc {i}:content:1of1:0to9",
            f"doc {i}",
            "é😀\n\t\\ text " * (i + 1) + ("x" * 3000 if i == 2 else ""),
            f"hash{i}",
            {"topic": "ünïcode 😀", "n": i, "f": 1.5, "nested": {"a": [1, None, True]}, "none": None},
            Vector(rng.standard_normal(DIM))
            if i == 1
            else rng.standard_normal(DIM).astype(np.float32 if i else np.float64),
            None if i == 1 else f"digest{i}:1",
        )
        for i in range(3)
    ]
    try:
        async with db.transaction() as conn:
            await chunks.create_chunk_table(conn, table, DIM)
            await chunks.copy_new_chunks(conn, table, writes)
        async with db.connect() as conn:
            for w in writes:
                stored = await chunks.get_chunk(conn, table, w.chunk_id)
                assert stored is not None
                assert (stored.doc_id, stored.content, stored.content_hash, stored.metadata) == (
                    w.doc_id,
                    w.content,
                    w.content_hash,
                    w.metadata,
                )
                given = w.embedding.to_numpy() if isinstance(w.embedding, Vector) else w.embedding
                assert stored.embedding.to_list() == np.asarray(given, dtype=np.float32).tolist()
                fingerprint = await conn.scalar(
                    text(f"SELECT doc_fingerprint FROM {table} WHERE chunk_id = :id"), {"id": w.chunk_id}
                )
                assert fingerprint == w.fingerprint
    finally:
        async with db.transaction() as conn:
            await chunks.drop_chunk_table(conn, table)
        await db.close()
