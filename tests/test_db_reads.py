"""`Database.read()`: autocommit connections parked between reads (at most `PARKED_READS`, the pool's own),
reused one read at a time; a read that fails gives its connection back to the pool; `close()` lets none
linger. Real PostgreSQL (the session's embedded server, migrated by the served app)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import text

from agentkb.storage.db import PARKED_READS, Database
from agentkb.storage.metrics import pool_use


async def backend(db: Database) -> int:
    async with db.read() as conn:
        return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def test_reads_reuse_a_parked_connection_and_stay_within_the_pool(served: Any, pg_url: str) -> None:
    db = Database(pg_url, pool_size=3)
    try:
        first = await backend(db)
        assert [await backend(db) for _ in range(5)] == [first] * 5  # one connection, parked between reads
        assert db.parked == 1 and pool_use(db.engine)[0] == 1  # checked out of the pool, kept for the next

        async def slow() -> int:
            async with db.read() as conn:
                await conn.execute(text("SELECT pg_sleep(0.05)"))
                return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())

        pids = await asyncio.gather(*(slow() for _ in range(5)))
        assert len(set(pids)) == 5  # concurrent reads never share a connection
        assert db.parked == PARKED_READS and pool_use(db.engine)[0] == PARKED_READS  # the rest went back

        async with db.read() as conn:  # autocommit still: a write in a read commits on its own
            await conn.execute(text("CREATE TEMP TABLE parked_probe (n int)"))
            await conn.execute(text("INSERT INTO parked_probe VALUES (1)"))
        async with db.read() as conn:
            assert not conn.in_transaction()
            assert (await conn.execute(text("SELECT count(*) FROM parked_probe"))).scalar_one() == 1
            await conn.execute(text("DROP TABLE parked_probe"))
    finally:
        await db.close()
    assert db.parked == 0 and pool_use(db.engine)[0] == 0


async def test_a_read_that_fails_gives_its_connection_back(served: Any, pg_url: str) -> None:
    db = Database(pg_url, pool_size=2)
    try:
        await backend(db)
        assert db.parked == 1
        with pytest.raises(ZeroDivisionError):
            async with db.read() as conn:
                await conn.execute(text("SELECT 1"))
                raise ZeroDivisionError
        assert db.parked == 0 and pool_use(db.engine)[0] == 0  # back in the pool, not parked
        assert await backend(db) > 0  # and the next read works
    finally:
        await db.close()


async def test_parked_connections_go_back_once_the_pool_is_invalidated(served: Any, pg_url: str) -> None:
    """A lost connection invalidates it (and the pool replaces the others at their next checkout): the
    parked ones are not reused either."""
    db = Database(pg_url, pool_size=2)
    try:
        parked = await backend(db)
        assert await backend(db) == parked
        async with db.connect() as other:  # another connection of the pool, lost (invalidated)
            await other.execute(text("SELECT 1"))
            await other.invalidate()
        assert await backend(db) != parked  # the parked connection went back to the pool, a fresh one served
    finally:
        await db.close()
