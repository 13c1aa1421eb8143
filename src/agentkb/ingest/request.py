"""What an insert asks for and how it reports: the request (`InsertInput`), its progress, the sources of
documents it draws on (rows, a SELECT over a data source, files, crawled pages), all as document batches."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.errors import BadRequest, NotFound
from agentkb.kb.documents import ColumnSpec, Document, row_documents
from agentkb.storage.knowledge_bases import KnowledgeBaseRow
from agentkb.validation import check_storable

BATCH_ROWS = 256  # rows per batch drawn from a query or a file
# rows per batch of an insert's own `rows` (already in memory): one plan, one read of what is stored and
# one progress write per batch; at most `ingest.pipeline.LOCKED_DOCUMENTS`, so a first batch locks documents
# one by one
INLINE_BATCH_ROWS = 1_000


@dataclass(frozen=True, slots=True)
class InsertInput:
    rows: Any = None
    query: Any = None
    files: Any = None
    urls: Any = None
    limit: Any = None
    crawl_depth: Any = None
    filters: Any = None
    params: Any = None
    preprocessing: Any = None
    options: Any = None  # MindsDB's `INSERT ... USING kb_no_upsert / kb_skip_existing` (SQL only)
    partition: Any = None  # a partitioned insert: {batch_size, track_column, error} (SQL only)
    mirror: Any = None  # after the whole `query`, delete the documents it did not return (`ingest.mirror`)
    recrawl: Any = None  # crawl the KB's URL sources again, removing gone pages (`SELECT kb_recrawl(...)`)


class JobCancelled(Exception):
    """A cancel was requested for the running job."""


@dataclass(slots=True)
class Progress:
    job_id: str
    counts: dict[str, Any] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    cancel_requested: bool = False
    recorded_at: float = field(default_factory=time.monotonic)  # counts last recorded (or the run began)
    removed_chunks: int = 0  # chunks of the documents `removed`, added to the ingest's `deleted` at its end

    def count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def add_items(self, n: int) -> None:
        self.counts["items_total"] = self.counts.get("items_total", 0) + n

    def removed(self, documents: int, chunks: int) -> None:
        """Whole documents deleted by the insert (a mirrored insert's, a recrawl's gone pages)."""
        self.count("documents_deleted", documents)
        self.removed_chunks += chunks

    def item_failed(self, item: str, error: str) -> None:
        self.errors.append({"item": item, "error": error})
        self.counts["items_failed"] = self.counts.get("items_failed", 0) + 1


@dataclass(frozen=True, slots=True)
class SourceRun:
    """What one insert hands a document source: its transaction, the KB (locked), the request, the KB's
    columns and the job's progress."""

    conn: AsyncConnection
    kb: KnowledgeBaseRow
    given: InsertInput
    spec: ColumnSpec
    progress: Progress


class DocumentSource(Protocol):
    """Files or crawled pages as document batches (registered in `IngestService.document_sources`)."""

    async def validate(self, given: InsertInput) -> dict[str, Any]: ...

    def documents(self, run: SourceRun) -> AsyncIterator[list[Document]]: ...


class RowStream(Protocol):
    """A read-only SELECT over a data source, as `(columns, rows)` batches (the data-source service)."""

    def stream_query(
        self, sql: str, batch_size: int = ...
    ) -> AsyncIterator[tuple[list[str], list[dict[str, Any]]]]: ...


def column_spec(kb: KnowledgeBaseRow) -> ColumnSpec:
    return ColumnSpec(
        kb.id_column,
        tuple(kb.content_columns) if kb.content_columns else None,
        tuple(kb.metadata_columns) if kb.metadata_columns else None,
    )


def check_rows(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise BadRequest("'rows' must be a list of JSON objects", title="Invalid rows")
    if not value:
        raise BadRequest("'rows' is empty: give at least one row", title="Invalid rows")
    for index, row in enumerate(value):
        if not isinstance(row, dict) or not row:
            raise BadRequest(f"Row {index} must be a non-empty JSON object", title="Invalid rows")
    return check_storable(value, "rows")  # type: ignore[no-any-return]


def check_query(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadRequest("'query' must be a SQL SELECT string", title="Invalid SELECT query")
    return value


async def row_batches(rows: list[dict[str, Any]], spec: ColumnSpec) -> AsyncIterator[list[Document]]:
    for start in range(0, len(rows), INLINE_BATCH_ROWS):
        yield list(row_documents(rows[start : start + INLINE_BATCH_ROWS], spec, start_index=start))


async def query_batches(
    source: RowStream, sql: str, spec: ColumnSpec, progress: Progress | None = None
) -> AsyncIterator[list[Document]]:
    """The query's rows as documents; `progress` counts them (`processed_rows`, MindsDB's PROCESSED_ROWS)."""
    start = 0
    try:
        async for _columns, batch in source.stream_query(sql, BATCH_ROWS):
            if progress is not None:
                progress.count("processed_rows", len(batch))
            yield list(row_documents(batch, spec, start_index=start))
            start += len(batch)
    except NotFound as exc:  # an unknown data source is a bad query here, not a bad path
        raise BadRequest(exc.detail, title="Invalid SELECT query") from exc
