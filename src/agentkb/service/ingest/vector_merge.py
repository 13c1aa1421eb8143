"""Background merges of a chunk table's delta (rows written since the HNSW index was built) into the index.

An insert writes its chunks outside the HNSW index (`storage.vector_index`), then asks for a merge
(`schedule`): one task per table at a time; a request while one runs makes it look again when done. The task
first waits until no insert has asked for `settle_s` (a bulk load of many inserts is merged once, after its
last one, not rebuilt again and again while it runs). A merge happens once the delta holds `min_rows` rows: a
concurrent rebuild of the whole index when the delta is at least `rebuild_fraction` of the indexed rows
(building is many times cheaper per row than growing the graph row by row), else an incremental merge in
transactions of `batch` rows. A table of fewer than `min_table_rows` rows (indexed and delta together) is not
merged at all: PostgreSQL's planner scans a table that small exactly even where it has an HNSW index, so
such an index would be built (its build competing with the searches for the CPU) and never read. Merges of
one table are serialised across processes by an advisory lock; a failed one is logged and leaves the table
searchable (the delta is scanned exactly), and the next insert asks again. Merges are counted and timed by
outcome (`agentkb_vector_index_merges_total`, `agentkb_vector_index_merge_seconds`), and `pending` is read at
each scrape (`agentkb_vector_index_merges_pending`). A table of at most
`serial_build_rows` rows is rebuilt by one process, without PostgreSQL's parallel workers (see
`SERIAL_BUILD_ROWS`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb import metrics
from agentkb.kb.vectors import MAX_CHUNKS
from agentkb.storage import vector_index as vi
from agentkb.storage.db import Database

log = logging.getLogger("agentkb.ingest")
# An exact scan of the delta costs every search PostgreSQL time in proportion to the delta's rows, while
# indexing those rows is paid once: a delta of this many rows is merged.
DELTA_ROWS = 1024
# Below this many rows PostgreSQL's planner scans a table exactly even where an HNSW index covers it
# (hnsw.ef_search 100, the index over every row), so an index would be built and never read: it is not built.
MIN_TABLE_ROWS = 4000
# A rebuild of a table this small takes no parallel workers. The service ranks such a table's vectors in the
# process while its index is built (kb.vectors), so its searches do not wait for the build, but they share the
# CPU and memory with it: PostgreSQL's workers shorten such a build a little and slow the searches beside it
# more. A larger table is searched by exact scans until its build ends: it takes the workers.
SERIAL_BUILD_ROWS = MAX_CHUNKS
SETTLE_S = 0.5
REBUILD_FRACTION = 0.2
BATCH = 500
SWAP_ATTEMPTS = 10


@dataclass(frozen=True, slots=True)
class Target:
    table: str
    dim: int
    options: Mapping[str, int] | None


class VectorIndexMerger:
    def __init__(
        self,
        db: Database,
        *,
        min_rows: int = DELTA_ROWS,
        min_table_rows: int = MIN_TABLE_ROWS,
        rebuild_fraction: float = REBUILD_FRACTION,
        batch: int = BATCH,
        settle_s: float = SETTLE_S,
        serial_build_rows: int = SERIAL_BUILD_ROWS,
    ) -> None:
        self.db = db
        self.serial_build_rows = serial_build_rows
        self.min_rows = min_rows
        self.min_table_rows = min_table_rows
        self.settle_s = settle_s
        self._asked: dict[str, float] = {}  # table -> when an insert last asked for its merge
        self.rebuild_fraction = rebuild_fraction
        self.batch = batch
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()

    def schedule(self, table: str, dim: int, options: Mapping[str, int] | None) -> None:
        """Merge `table`'s delta in the background if it is large enough (no wait), once inserts settle."""
        self._asked[table] = time.monotonic()
        running = self.tasks.get(table)
        if running is not None and not running.done():
            self._again.add(table)
            return
        self.tasks[table] = asyncio.create_task(self._loop(Target(table, dim, options)))

    @property
    def pending(self) -> int:
        """Tables whose merge is scheduled (waiting for their inserts to settle) or running."""
        return sum(not task.done() for task in self.tasks.values())

    async def _settle(self, table: str) -> None:
        while (left := self._asked.get(table, 0.0) + self.settle_s - time.monotonic()) > 0:
            await asyncio.sleep(left)

    async def _loop(self, target: Target) -> None:
        while True:
            await self._settle(target.table)
            self._again.discard(target.table)
            started = time.monotonic()
            try:
                outcome = await self.merge(target.table, target.dim, target.options)
            except asyncio.CancelledError:
                raise
            except Exception:
                metrics.vector_index_merges.labels("failed").inc()
                log.exception("merging the vector index of %s failed", target.table)
            else:
                if outcome in ("rebuilt", "merged"):
                    metrics.vector_index_merges.labels(outcome).inc()
                    metrics.vector_index_merge_duration.labels(outcome).observe(time.monotonic() - started)
            if target.table not in self._again:
                return

    async def wait(self) -> None:
        """Until every scheduled merge is done (tests, shutdown)."""
        while pending := [t for t in self.tasks.values() if not t.done()]:
            await asyncio.gather(*pending, return_exceptions=True)

    async def close(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)

    async def merge(self, table: str, dim: int, options: Mapping[str, int] | None) -> str:
        """One merge now, if due: "rebuilt", "merged", "none" (delta below `min_rows`, or the table below
        `min_table_rows`) or "busy"."""
        async with self.db.engine.connect() as plain:
            conn = await plain.execution_options(isolation_level="AUTOCOMMIT")
            if not await vi.try_merge_lock(conn, table):
                return "busy"
            try:
                if await conn.scalar(text("SELECT to_regclass(:t) IS NULL"), {"t": table}):
                    return "none"  # dropped meanwhile
                vi.forget(table)
                mark = await vi.watermark(conn, table)
                delta, indexed = await vi.sizes(conn, table, mark)
                if delta < self.min_rows or delta + indexed < self.min_table_rows:
                    return "none"
                if delta >= self.rebuild_fraction * indexed:
                    await self._rebuild(
                        conn, Target(table, dim, options), serial=delta + indexed <= self.serial_build_rows
                    )
                    outcome = "rebuilt"
                else:
                    await self._incremental(table, mark, delta)
                    outcome = "merged"
                await conn.execute(
                    text(f"ANALYZE {table}")
                )  # `seq` statistics: searches scan the delta by index
                return outcome
            finally:
                await vi.merge_unlock(conn, table)

    async def _rebuild(self, conn: AsyncConnection, target: Target, *, serial: bool) -> None:
        table = target.table
        fresh = f"{vi.index_name(table)}_new"
        await conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {fresh}"))  # a failed build's leftover
        mark = int(await conn.scalar(text(f"SELECT coalesce(max(seq), 0) FROM {table}")) or 0)
        await conn.execute(text(vi.build_memory_sql(local=False)))
        if serial:
            await conn.execute(text("SET max_parallel_maintenance_workers = 0"))
        try:
            await conn.execute(
                text(vi.hnsw_sql(table, target.dim, mark, target.options, name=fresh, concurrently=True))
            )
        finally:
            await conn.execute(text("RESET maintenance_work_mem"))
            if serial:
                await conn.execute(text("RESET max_parallel_maintenance_workers"))
        for attempt in range(SWAP_ATTEMPTS):
            try:
                async with self.db.transaction() as tx:
                    await tx.execute(text("SET LOCAL lock_timeout = '2s'"))
                    for name in await vi.vector_indexes(tx, table):
                        if name != fresh:
                            await tx.execute(text(f"DROP INDEX {name}"))
                    await tx.execute(text(f"ALTER INDEX {fresh} RENAME TO {vi.index_name(table)}"))
                    await vi.set_watermark(tx, table, mark)
                log.info("vector index of %s rebuilt up to seq %d", table, mark)
                return
            except DBAPIError as exc:
                if "lock timeout" not in str(exc) or attempt == SWAP_ATTEMPTS - 1:
                    await conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {fresh}"))
                    raise
                await asyncio.sleep(1.0)

    async def _incremental(self, table: str, mark: int, delta: int) -> None:
        done = 0
        while done < delta:
            async with self.db.transaction() as tx:
                merged = await vi.merge_some(tx, table, mark, self.batch)
            if merged == 0:
                break
            done += merged
        log.info("vector index of %s: %d delta rows merged", table, done)
