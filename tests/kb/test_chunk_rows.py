"""How a chunk table stores its rows (`storage.chunks.ROW_TOAST_TARGET`): a chunk is kept whole in its row up to
a page, its content neither compressed nor moved to the TOAST table; a row too large for a page still is.
Real PostgreSQL + pgvector (`served`: the session's server has migrated the database)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from agentkb.storage import chunks
from agentkb.storage.chunks import ChunkWrite
from agentkb.storage.db import Database
from tests.helpers import chunk_table


def prose(rng: np.random.Generator, n: int, words: int = 90) -> list[str]:
    """Texts of ~540 characters from random letters: nothing pglz could shrink by a quarter."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return [
        " ".join("".join(rng.choice(letters, size=int(rng.integers(3, 9)))) for _ in range(words))
        for _ in range(n)
    ]


async def stored(db: Database, table: str) -> dict[str, object]:
    async with db.connect() as conn:
        row = (
            await conn.execute(
                text(
                    "SELECT c.reloptions, pg_relation_size(c.reltoastrelid) AS toast_bytes, "
                    f"(SELECT count(*) FROM {table} WHERE pg_column_compression(content) IS NOT NULL) "
                    "AS compressed FROM pg_class c WHERE c.oid = CAST(:t AS regclass)"
                ),
                {"t": table},
            )
        ).one()
    return {"options": row.reloptions, "toast_bytes": row.toast_bytes, "compressed": row.compressed}


@pytest.mark.parametrize("dim", [384, 1536])
async def test_a_chunk_row_is_kept_whole(served: Any, pg_url: str, unique: str, dim: int) -> None:
    """A 384-d and a 1,536-d chunk of ~540 characters (over PostgreSQL's default 2 kB threshold), written by
    COPY and by upsert: nothing in the TOAST table, nothing compressed, the content read back as written."""
    rng = np.random.default_rng(dim)
    texts = prose(rng, 40)
    vectors = rng.standard_normal((40, dim)).astype(np.float32)
    writes = [
        ChunkWrite(f"d{i}:c:1of1", f"d{i}", t, f"h{i}", {"n": i}, v)
        for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
    ]
    table = f"kb_chunks_rows_{dim}_{unique}"
    async with chunk_table(pg_url, table, dim, pool_size=1) as db:
        async with db.transaction() as conn:
            await chunks.copy_new_chunks(conn, table, writes[:30])
            await chunks.upsert_chunks(conn, table, writes[20:])  # ten replaced, ten new
        assert min(len(t) for t in texts) > 400
        assert await stored(db, table) == {
            "options": [f"toast_tuple_target={chunks.ROW_TOAST_TARGET}"],
            "toast_bytes": 0,
            "compressed": 0,
        }
        async with db.connect() as conn:
            back = dict((await conn.execute(text(f"SELECT chunk_id, content FROM {table}"))).tuples().all())
        assert back == {w.chunk_id: w.content for w in writes}
        async with db.connect() as conn:  # counted only as far as asked (BM25's "is this KB large?")
            counted = [await chunks.count_up_to(conn, table, n) for n in (1, 39, 40, 41, 1000)]
            assert counted == [1, 39, 40, 40, 40]
            assert await chunks.counts(conn, table) == (40, 40)


async def test_a_row_larger_than_a_page_is_still_stored(served: Any, pg_url: str, unique: str) -> None:
    """A 4,000-d vector (16 kB) cannot stay in an 8 kB page: it moves out of line, as before, and reads back."""
    table = f"kb_chunks_rows_big_{unique}"
    vector = np.random.default_rng(4).standard_normal(chunks.MAX_DIM).astype(np.float32)
    async with chunk_table(pg_url, table, chunks.MAX_DIM, pool_size=1) as db:
        async with db.transaction() as conn:
            await chunks.copy_new_chunks(conn, table, [ChunkWrite("d:c:1of1", "d", "big", "h", {}, vector)])
        assert (await stored(db, table))["toast_bytes"] > 0
        async with db.connect() as conn:
            back = (await conn.execute(text(f"SELECT embedding::text FROM {table}"))).scalar_one()
        np.testing.assert_allclose(np.asarray(back.strip("[]").split(","), dtype=np.float32), vector)
