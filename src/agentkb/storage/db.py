"""Connection pool and transactions: the async SQLAlchemy engine every repository uses."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import lru_cache
from typing import Any

import orjson
import psycopg
from pgvector.psycopg import register_vector_async
from psycopg.types.array import ListBinaryDumper
from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


# Session defaults of every pooled connection: the HNSW candidate list searches use (`hnsw_ef_search`, the
# AGENTKB_HNSW_EF_SEARCH setting), and iterative index scans (pgvector >= 0.8; ignored by older versions) so
# a filtered search still finds k rows. Set once per connection, so a search needs no `SET` round trip of
# its own. The pool entry's `info` keeps the default (EF_DEFAULT_INFO) and the value the session holds now
# (EF_SEARCH_INFO): a search that wants another list sets it, and on an autocommit connection leaves it set
# for the next search of that breadth (storage.chunk_search).
HNSW_EF_SEARCH = 100
MAX_EF_SEARCH = 1000  # pgvector's bounds for hnsw.ef_search
MIN_EF_SEARCH = 1
EF_SEARCH_INFO = "agentkb.hnsw_ef_search"
EF_DEFAULT_INFO = "agentkb.hnsw_ef_search_default"


def session_settings(ef_search: int = HNSW_EF_SEARCH) -> dict[str, str]:
    return {"hnsw.ef_search": str(ef_search), "hnsw.iterative_scan": "relaxed_order"}


POOL_RECYCLE_S = 3600
PARKED_READS = 2  # autocommit connections kept checked out between reads (Database.read)
# A pool entry's `info` key: its connection goes through a transaction-mode pooler (PgBouncer), so nothing
# may rely on session state — a search sets its HNSW breadth inside its own transaction (storage.chunk_search)
TRANSACTION_POOLED_INFO = "agentkb.transaction_pooled"
# SQLSTATEs of a server that is going away or not accepting connections (admin shutdown, crash shutdown,
# cannot connect now: starting up, shutting down, in recovery); class 08 is "connection exception"
_LOST_STATES = frozenset({"57P01", "57P02", "57P03"})


def connection_lost(exc: BaseException | None) -> bool:
    """Whether `exc` (or an error it was raised from) says PostgreSQL is unreachable or went away — a
    restart, a failover, a network cut — rather than that the statement was wrong: the same request may
    succeed when retried a moment later (on a new connection, perhaps to a new primary)."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, DBAPIError) and exc.connection_invalidated:
            return True
        if isinstance(exc, psycopg.OperationalError):
            state = exc.sqlstate
            if state is None or state.startswith("08") or state in _LOST_STATES:
                return True
        exc = exc.orig if isinstance(exc, DBAPIError) else (exc.__cause__ or exc.__context__)
        seen += 1
    return False


class TextArray(list[str | None]):
    """A list of strings bound as one `text[]` parameter in PostgreSQL's binary array format. psycopg sends a
    plain list of `str` in the text format, built element by element in Python, several times slower than
    the binary format (an insert of a batch of documents binds several such lists)."""


async def _on_connect(conn: Any, settings: dict[str, str]) -> None:
    await register_vector_async(conn)
    conn.adapters.register_dumper(TextArray, ListBinaryDumper)
    for name, value in settings.items():  # none through a transaction-mode pooler: the session is not ours
        await conn.execute("SELECT set_config(%s, %s, false)", (name, value))
    await conn.commit()


_BIND = re.compile(r"(?<![:\w\\]):(\w+)(?!:)")  # a `:name` parameter, as SQLAlchemy's text() finds them


@lru_cache(maxsize=512)
def driver_sql(statement: str) -> str:
    """The statement in psycopg's parameter style (`%(name)s`; a literal `%` doubled)."""
    return _BIND.sub(r"%(\1)s", statement.replace("%", "%%"))


async def fetch_tuples(
    conn: AsyncConnection,
    statement: str,
    params: dict[str, Any],
    *,
    binary: bool = False,
    local_settings: dict[str, str] | None = None,
) -> list[tuple[Any, ...]]:
    """The rows of `statement` (SQLAlchemy's `:name` parameters) as tuples, run on the pooled connection's
    psycopg connection itself, in its transaction if one is open. For the hot statements (the search, an
    insert's look-up of 1,000 documents' stored chunks): SQLAlchemy's execution layer (compiled-statement
    lookup, execution context, result metadata, a Row per row) costs more than psycopg's own work there.
    psycopg prepares a statement after a few runs, as through SQLAlchemy; errors surface as SQLAlchemy's
    (`DBAPIError` subclasses with the psycopg error as `orig`, as callers expect). `binary`: the results in
    PostgreSQL's binary format. `local_settings`: set for this statement only, in a transaction of its own
    (a savepoint inside an open one) — where session state cannot be relied on (a transaction-mode pooler)."""
    raw = await conn.get_raw_connection()
    driver: psycopg.AsyncConnection[Any] = raw.driver_connection  # type: ignore[assignment]
    sql = driver_sql(statement)
    try:
        if local_settings:
            async with driver.transaction(), driver.cursor(binary=binary) as cursor:
                names = ", ".join("set_config(%s, %s, true)" for _ in local_settings)
                await cursor.execute(f"SELECT {names}", [v for pair in local_settings.items() for v in pair])
                await cursor.execute(sql, params)
                return await cursor.fetchall()
        async with driver.cursor(binary=binary) as cursor:
            await cursor.execute(sql, params)
            return await cursor.fetchall()
    except psycopg.Error as exc:
        if driver.broken:
            await conn.invalidate(exc)
        raise DBAPIError.instance(sql, params, exc, psycopg.Error) from exc


def to_async_url(url: str) -> str:
    """Accept `postgresql://` and `postgres://` URLs and pin the psycopg (v3) driver."""
    for prefix in ("postgresql+psycopg://", "postgresql+psycopg2://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    raise ValueError(f"not a PostgreSQL URL: {url.split('://')[0]}://...")


async def _release_leases(conn: AsyncConnection) -> None:
    await conn.rollback()
    await conn.execute(text("SELECT pg_advisory_unlock_all()"))
    await conn.commit()


class Database:
    """Owns the engine. `transaction()` is the one way to write; `connect()` reads.

    `transaction_pooled`: the URL goes through a transaction-mode pooler (PgBouncer), where each
    transaction may run on another server session: psycopg prepares no statement (PgBouncer before 1.21
    cannot carry them; `prepare_threshold=None`) and no session default is set (a search sets its HNSW
    settings in its own transaction). Session-level advisory locks cannot work there: the runtime gives the
    work that holds them (job leases, index merges) a Database of its own on a direct URL."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        hnsw_ef_search: int = HNSW_EF_SEARCH,
        transaction_pooled: bool = False,
    ) -> None:
        if not MIN_EF_SEARCH <= hnsw_ef_search <= MAX_EF_SEARCH:
            raise ValueError(f"hnsw_ef_search must be {MIN_EF_SEARCH}..{MAX_EF_SEARCH}, got {hnsw_ef_search}")
        self.url = to_async_url(url)
        self.hnsw_ef_search = hnsw_ef_search
        self.transaction_pooled = transaction_pooled
        self.writes = 0  # transactions (and autocommitted writes) ended here: read routing's "wrote since"
        self.engine: AsyncEngine = create_async_engine(
            self.url,
            pool_size=pool_size,
            max_overflow=pool_size,
            # no pre-ping: it costs a round trip per checkout; a dropped connection fails one request and
            # SQLAlchemy then invalidates the pool (every connection older than the failure is replaced at
            # its next checkout: after a failover, none of them reaches the old server again)
            pool_recycle=POOL_RECYCLE_S,
            json_serializer=_dumps,
            json_deserializer=orjson.loads,
            connect_args={"prepare_threshold": None} if transaction_pooled else {},
        )
        settings = {} if transaction_pooled else session_settings(hnsw_ef_search)

        def on_connect(dbapi_connection: Any, record: Any) -> None:
            """numpy arrays in and out of `vector` columns, in pgvector's binary format (needs the
            extension, which the first migration creates before any pooled connection is opened); the
            session settings."""
            dbapi_connection.run_async(lambda conn: _on_connect(conn, settings))
            record.info[EF_SEARCH_INFO] = record.info[EF_DEFAULT_INFO] = hnsw_ef_search
            record.info[TRANSACTION_POOLED_INFO] = transaction_pooled

        event.listen(self.engine.sync_engine, "connect", on_connect)
        # reads of one statement: no BEGIN before it, no ROLLBACK after it (one round trip, not three)
        self.autocommit: AsyncEngine = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        self._parked: list[tuple[AsyncConnection, float, int]] = []  # read connections kept for the next read
        self._closing = False
        self._generation = 0  # counts the pool's invalidations (a lost connection): parked ones then go back

        def on_invalidate(dbapi_connection: Any, record: Any, exception: Any) -> None:
            self._generation += 1

        event.listen(self.engine.sync_engine, "invalidate", on_invalidate)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        try:
            async with self.engine.begin() as conn:
                yield conn
        finally:
            self.writes += 1  # committed, or perhaps committed (a connection lost at COMMIT)

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.connect() as conn:
            yield conn

    @asynccontextmanager
    async def leasing(self) -> AsyncIterator[AsyncConnection]:
        """A connection to hold leases on (session-level advisory locks: an ingestion job's, a scheduled
        job's run); on the way out every such lock it holds is released — or, when that fails, the
        connection is dropped, which releases them too — so a pooled connection never keeps one."""
        async with self.engine.connect() as conn:
            try:
                yield conn
            finally:
                try:
                    await asyncio.shield(_release_leases(conn))
                except Exception:
                    await conn.invalidate()

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A connection in autocommit mode: each statement its own snapshot, no transaction round trips.
        For reads that are one statement (or whose statements need no common snapshot).

        Up to `PARKED_READS` of these connections stay checked out of the pool between reads, parked for
        the next one: checking a connection out of SQLAlchemy's pool and back (a `Connection`, its
        autocommit set and reset, the reset on return) is a noticeable share of a search's CPU in the
        server. They are the pool's own connections (no more are opened than `pool_size` and its overflow
        allow), reused one read at a time, on the event loop that made them; one whose read raised (a
        broken connection, a cancelled request) or that has been kept for the pool's recycle age goes back
        to the pool instead, and so does every parked one once any connection of the pool is invalidated
        (as the pool then replaces its own at their next checkout). Session state carries over from read to
        read as it does through the pool."""
        conn: AsyncConnection | None = None
        while self._parked and conn is None:
            conn, born, generation = self._parked.pop()
            if generation != self._generation:  # the pool was invalidated since it was parked: give it back
                await conn.close()
                conn = None
        if conn is None:
            conn, born = await self.autocommit.connect(), time.monotonic()
        done = False
        try:
            yield conn
            done = True
        finally:
            if (
                done
                and not self._closing
                and len(self._parked) < PARKED_READS
                and not conn.invalidated
                and time.monotonic() - born < POOL_RECYCLE_S
            ):
                try:
                    if conn.in_transaction():  # SQLAlchemy's autobegun marker (no transaction in autocommit)
                        await conn.commit()
                except BaseException:
                    await conn.close()
                    raise
                self._parked.append((conn, born, self._generation))
            else:
                await conn.close()

    @asynccontextmanager
    async def autocommitted(self) -> AsyncIterator[AsyncConnection]:
        """`read()` for writes that need no transaction in common: each statement is its own, committed by
        itself (one round trip, not BEGIN, the statement and COMMIT)."""
        try:
            async with self.read() as conn:
                yield conn
        finally:
            self.writes += 1

    @property
    def parked(self) -> int:
        """Read connections parked between reads (checked out of the pool, idle)."""
        return len(self._parked)

    async def close(self) -> None:
        self._closing = True
        while self._parked:
            await self._parked.pop()[0].close()
        await self.engine.dispose()
