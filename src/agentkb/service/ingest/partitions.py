"""A partitioned insert (MindsDB's `INSERT INTO <kb> SELECT ... USING batch_size = n, track_column = c`, and its
autobatch): the SELECT's rows in batches of `batch_size`, ordered by the track column, each batch stored in its
own transaction together with the job's progress (`processed_rows`, the last track value in `context`).

So, as in MindsDB, what was stored stays when the job is cancelled or fails, and a re-run (a worker taking over a
job whose worker stopped, or `query_resume`) goes on after the last track value stored. Without a track column a
re-run starts over (the inserts are idempotent upserts). `error = 'skip'` records a failing batch and goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Protocol

from agentkb.ingest.pipeline import IngestStats
from agentkb.ingest.request import InsertInput, JobCancelled, Progress, column_spec
from agentkb.kb.documents import Document, row_documents
from agentkb.service.ingest.query_sources import column_named, track_value
from agentkb.service.ingest.writer import ChunkWriter
from agentkb.storage import jobs
from agentkb.storage import knowledge_bases as repo
from agentkb.storage.db import Database
from agentkb.storage.jobs import JobRow

Batch = tuple[list[str], list[dict[str, Any]]]


class PartitionSource(Protocol):
    def stream_partitions(
        self, sql: str, batch_size: int, track_column: str | None, after: Any
    ) -> AsyncIterator[Batch]: ...


async def _one(documents: list[Document]) -> AsyncIterator[list[Document]]:
    yield documents


def _last_value(rows: list[dict[str, Any]], key: str, current: Any) -> Any:
    values = [track_value(r[key]) for r in rows if r.get(key) is not None]
    if not values:
        return current
    try:
        return max([*values, current] if current is not None else values)
    except TypeError:  # mixed types: the rows came ordered by the track column
        return values[-1]


class PartitionedInserts:
    """Runs the partitioned inserts of the ingest service's jobs: the rows come from `source`, each batch is
    written by `writer` in a transaction of `db`."""

    def __init__(self, db: Database, writer: ChunkWriter, source: PartitionSource) -> None:
        self.db = db
        self.writer = writer
        self.source = source

    async def run(self, job: JobRow, progress: Progress) -> None:
        given = InsertInput(**job.request)
        assert isinstance(given.partition, dict) and isinstance(given.query, str)
        batch_size = int(given.partition["batch_size"])
        track: str | None = given.partition.get("track_column")
        skip_errors = given.partition.get("error") == "skip"
        options = given.options or {}
        context = dict(job.context)
        after = context.get("track_value") if track else None
        if after is not None:  # going on after a previous run: keep its counts
            progress.counts.update(job.counts)
        else:
            context = {}
        totals = IngestStats.from_counts(progress.counts)
        processed = int(progress.counts.get("processed_rows", 0) or 0)
        skipped = int(progress.counts.get("skipped_existing", 0) or 0)
        key: str | None = None
        async for columns, rows in self.source.stream_partitions(given.query, batch_size, track, after):
            if not rows:
                continue
            if track is not None and key is None:
                key = column_named(columns, track)
            try:
                async with self.db.transaction() as conn:
                    kb = await self.writer.lock(conn, job.kb_id)
                    ingestor = self.writer.ingestor(conn, kb, options)
                    await ingestor.run(
                        _one(list(row_documents(rows, column_spec(kb), start_index=processed)))
                    )
                    if key is not None:
                        context["track_value"] = _last_value(rows, key, context.get("track_value"))
                    counts: dict[str, Any] = {
                        **progress.counts,
                        **_added(totals, ingestor.stats),
                        "processed_rows": processed + len(rows),
                        "skipped_existing": skipped + ingestor.skipped,
                    }
                    cancel = await jobs.save_partition(conn, job.id, counts, context)
                    await repo.update(conn, kb.id, {}, content=True)
            except (JobCancelled, asyncio.CancelledError):
                raise
            except Exception as exc:
                if not skip_errors:
                    raise
                progress.item_failed(f"rows {processed + 1}..{processed + len(rows)}", str(exc))
                processed += len(rows)
                progress.counts["processed_rows"] = processed
                continue
            self.writer.written(kb, ingestor)
            totals = IngestStats.from_counts(counts)
            processed, skipped = counts["processed_rows"], counts["skipped_existing"]
            progress.counts.update(counts)
            if cancel:
                progress.cancel_requested = True
                raise JobCancelled


def _added(totals: IngestStats, batch: IngestStats) -> dict[str, int]:
    both = IngestStats(**totals.as_counts())
    both.add(batch)
    return both.as_counts()
