"""Inserting into a knowledge base (spec 4.5): settings from `params`, then rows → files → urls → query,
all in one transaction: an insert is applied whole or not at all."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.errors import AgentKBError, BadRequest, Conflict, NotFound, kb_not_found
from agentkb.ingest.pipeline import Ingestor, IngestStats
from agentkb.kb.chunking import chunking_config
from agentkb.kb.documents import ColumnSpec, Document, row_documents
from agentkb.kb.embedders import config as embedding_config
from agentkb.kb.embedders.registry import EmbedderRegistry
from agentkb.service import projects
from agentkb.service.data_sources import DataSourceService
from agentkb.service.validation import check_dict, check_storable, check_str_list, is_identifier
from agentkb.storage import chunks, jobs
from agentkb.storage import knowledge_bases as repo
from agentkb.storage.db import Database
from agentkb.storage.jobs import JobRow
from agentkb.storage.knowledge_bases import KnowledgeBaseRow

log = logging.getLogger(__name__)
BATCH_ROWS = 256
SETTING_KEYS = ("id_column", "metadata_columns", "content_columns", "embedding_model", "reranking_model")


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


class JobCancelled(Exception):
    """A cancel was requested for the running job."""


@dataclass(slots=True)
class Progress:
    job_id: str
    counts: dict[str, Any] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    cancel_requested: bool = False

    def count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def add_items(self, n: int) -> None:
        self.counts["items_total"] = self.counts.get("items_total", 0) + n

    def item_failed(self, item: str, error: str) -> None:
        self.errors.append({"item": item, "error": error})
        self.counts["items_failed"] = self.counts.get("items_failed", 0) + 1


class DocumentSource(Protocol):
    """Files or crawled pages as document batches (registered in `IngestService.document_sources`)."""

    async def validate(self, given: InsertInput) -> dict[str, Any]: ...

    def documents(self, conn: AsyncConnection, kb: KnowledgeBaseRow, given: InsertInput, spec: ColumnSpec,
                  progress: Progress) -> AsyncIterator[list[Document]]: ...


def column_spec(kb: KnowledgeBaseRow) -> ColumnSpec:
    return ColumnSpec(
        kb.id_column,
        tuple(kb.content_columns) if kb.content_columns else None,
        tuple(kb.metadata_columns) if kb.metadata_columns else None,
    )


async def _row_batches(rows: list[dict[str, Any]], spec: ColumnSpec) -> AsyncIterator[list[Document]]:
    for start in range(0, len(rows), BATCH_ROWS):
        yield list(row_documents(rows[start:start + BATCH_ROWS], spec, start_index=start))


class IngestService:
    """Every insert is a job: `submit(wait=True)` runs it in the request (the spec's synchronous insert);
    `submit(wait=False)` queues it for a worker (`ingest.jobs.JobWorker`)."""

    def __init__(self, db: Database, embedders: EmbedderRegistry, data_sources: DataSourceService, *,
                 heartbeat_s: float = 5.0) -> None:
        self.db = db
        self.embedders = embedders
        self.data_sources = data_sources
        self.heartbeat_s = heartbeat_s
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.document_sources: dict[str, DocumentSource] = {}  # "files", "urls": registered by the app
        self.queued = asyncio.Event()  # set when an async job is queued, to wake the in-process worker

    async def _validate(self, given: InsertInput) -> dict[str, Any]:
        request: dict[str, Any] = {}
        if given.rows is not None:
            request["rows"] = self._rows(given.rows)
        if given.query is not None:
            request["query"] = self._query(given.query)
        for key in ("files", "urls"):
            if getattr(given, key) is not None:
                source = self.document_sources.get(key)
                if source is None:
                    raise BadRequest(f"Inserting '{key}' is not supported by this server", title="Unsupported insert")
                request.update(await source.validate(given))
        for key in ("params", "preprocessing"):
            if getattr(given, key) is not None:
                request[key] = check_dict(getattr(given, key), key)
        if not request:
            raise BadRequest("Nothing to insert: give 'rows', 'query', 'files' or 'urls'", title="Missing parameter")
        return request

    async def submit(self, project_name: str, kb_name: str, given: InsertInput, *, wait: bool = True) -> JobRow:
        request = await self._validate(given)
        async with self.db.transaction() as conn:
            project = await projects.resolve(conn, project_name)
            kb = await repo.get(conn, project.id, kb_name) if is_identifier(kb_name) else None
            if kb is None:
                raise kb_not_found(kb_name)
            job = await jobs.create(conn, job_id=uuid.uuid4().hex, project_id=project.id, kb_id=kb.id,
                                    mode="sync" if wait else "async", request=request,
                                    worker=self.worker_id if wait else None)
        if not wait:
            self.queued.set()
            return job
        return await self.run_job(job)

    async def insert(self, project_name: str, kb_name: str, given: InsertInput) -> IngestStats:
        """A synchronous insert; its work counts."""
        job = await self.submit(project_name, kb_name, given, wait=True)
        return IngestStats(**{k: int(job.counts.get(k, 0)) for k in IngestStats.__slots__})

    async def run_job(self, job: JobRow) -> JobRow:
        """Run a claimed or synchronous job to its end and record how it ended. A failure is re-raised
        (after being recorded) so a waiting request answers with its status."""
        progress = Progress(job.id)
        started = time.perf_counter()
        beater = asyncio.create_task(self._beat(job.id, progress, asyncio.current_task()))
        try:
            await self._execute(job, progress)
        except (JobCancelled, asyncio.CancelledError) as exc:
            if not progress.cancel_requested:
                raise  # the process is stopping: the job stays claimed and is resumed or failed later
            await self._finish(job.id, "cancelled", progress, "cancelled on request")
            if isinstance(exc, asyncio.CancelledError):
                asyncio.current_task().uncancel()  # type: ignore[union-attr]
            if job.mode == "sync":  # the waiting request must not read "stored" as its answer
                raise Conflict(f"Insert job {job.id} was cancelled; nothing of it was stored",
                               title="Insert cancelled") from None
        except AgentKBError as exc:
            await self._finish(job.id, "failed", progress, exc.detail)
            raise
        except Exception as exc:
            log.exception("ingest job %s failed", job.id)
            await self._finish(job.id, "failed", progress, f"{type(exc).__name__}: {exc}")
            raise
        else:
            await self._finish(job.id, "succeeded", progress, None)
        finally:
            beater.cancel()
        log.info("ingest job %s: %s in %.2fs", job.id, progress.counts, time.perf_counter() - started)
        async with self.db.connect() as conn:
            final = await jobs.get(conn, job.id)
        assert final is not None
        return final

    async def _beat(self, job_id: str, progress: Progress, runner: asyncio.Task[Any] | None) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            async with self.db.transaction() as conn:
                if await jobs.heartbeat(conn, job_id) and runner is not None:
                    progress.cancel_requested = True
                    runner.cancel()
                    return

    async def _finish(self, job_id: str, state: str, progress: Progress, error: str | None) -> None:
        async with self.db.transaction() as conn:
            await jobs.finish(conn, job_id, state, progress.counts, progress.errors, error)

    async def _report(self, progress: Progress, stats: IngestStats) -> None:
        progress.counts.update({k: getattr(stats, k) for k in IngestStats.__slots__})
        async with self.db.transaction() as conn:
            if await jobs.progress(conn, progress.job_id, progress.counts, progress.errors):
                progress.cancel_requested = True
        if progress.cancel_requested:
            raise JobCancelled

    async def _execute(self, job: JobRow, progress: Progress) -> None:
        given = InsertInput(**job.request)
        async with self.db.transaction() as conn:
            kb = await repo.get_by_id(conn, job.kb_id, for_update=True)
            if kb is None:
                raise NotFound("The knowledge base of this job was deleted", title="Knowledge Base not found")
            kb = await self._apply_settings(conn, kb, given)
            embedder = self.embedders.get(kb.embedding_model)
            ingestor = Ingestor(conn, kb.id, kb.storage_table, embedder, chunking_config(kb.params),
                                on_batch=lambda stats: self._report(progress, stats))
            spec = column_spec(kb)
            bulk = (await chunks.counts(conn, kb.storage_table))[1] == 0
            if bulk:  # an empty KB: build its HNSW index once, after the load
                await chunks.drop_vector_index(conn, kb.storage_table)
            if given.rows:
                progress.add_items(len(given.rows))
                await ingestor.run(_row_batches(given.rows, spec))
            for key in ("files", "urls"):
                if getattr(given, key) is not None:
                    await ingestor.run(self.document_sources[key].documents(conn, kb, given, spec, progress))
            if given.query is not None:
                await ingestor.run(self._query_batches(given.query, spec))
            progress.counts.update({k: getattr(ingestor.stats, k) for k in IngestStats.__slots__})
            if bulk:
                await chunks.build_vector_index(conn, kb.storage_table, kb.vector_dim)
            await repo.update(conn, kb.id, {})

    @staticmethod
    def _rows(value: Any) -> list[dict[str, Any]]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise BadRequest("'rows' must be a list of JSON objects", title="Invalid rows")
        if not value:
            raise BadRequest("'rows' is empty: give at least one row", title="Invalid rows")
        for index, row in enumerate(value):
            if not isinstance(row, dict) or not row:
                raise BadRequest(f"Row {index} must be a non-empty JSON object", title="Invalid rows")
        return check_storable(value, "rows")  # type: ignore[no-any-return]

    @staticmethod
    def _query(value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise BadRequest("'query' must be a SQL SELECT string", title="Invalid SELECT query")
        return value

    async def _query_batches(self, sql: str, spec: ColumnSpec) -> AsyncIterator[list[Document]]:
        start = 0
        try:
            async for _columns, batch in self.data_sources.stream_query(sql, BATCH_ROWS):
                yield list(row_documents(batch, spec, start_index=start))
                start += len(batch)
        except NotFound as exc:  # an unknown data source is a bad query here, not a bad path
            raise BadRequest(exc.detail, title="Invalid SELECT query") from exc

    async def _apply_settings(self, conn: AsyncConnection, kb: KnowledgeBaseRow, given: InsertInput) -> KnowledgeBaseRow:
        """MindsDB lets an insert's `params` (and `preprocessing`) update the KB's settings."""
        params = check_dict(given.params, "params") if given.params is not None else {}
        values: dict[str, Any] = {}
        new_params = dict(kb.params)
        if given.preprocessing is not None:
            new_params["preprocessing"] = check_dict(given.preprocessing, "preprocessing")
        for key in ("metadata_columns", "content_columns"):
            if params.get(key) is not None:
                values[key] = check_str_list(params[key], f"params.{key}")
        if params.get("id_column") is not None:
            if not isinstance(params["id_column"], str):
                raise BadRequest("'params.id_column' must be a string", title="Invalid value")
            values["id_column"] = params["id_column"]
        if params.get("reranking_model") is not None:
            values["reranking_model"] = params["reranking_model"] or None
        if params.get("embedding_model") is not None:
            values.update(await self._embedder_change(conn, kb, params["embedding_model"]))
        for key in ("chunk_size", "chunk_overlap"):
            if key in params:
                new_params[key] = params[key]
        chunking_config(new_params)  # validate before anything is written
        if new_params != kb.params:
            values["params"] = new_params
        if not values:
            return kb
        await repo.update(conn, kb.id, values)
        updated = await repo.get(conn, kb.project_id, kb.name)
        assert updated is not None
        return updated

    async def _embedder_change(self, conn: AsyncConnection, kb: KnowledgeBaseRow, given: Any) -> dict[str, Any]:
        new = embedding_config.normalize(given, kb.embedding_model)
        same_model = all(new.get(k) == kb.embedding_model.get(k) for k in ("provider", "model_name", "dimensions"))
        if same_model:
            return {"embedding_model": new}  # e.g. a new api_key or base_url
        documents, _ = await chunks.counts(conn, kb.storage_table)
        if documents:
            raise BadRequest(
                f"Knowledge base {kb.name} holds data embedded with {kb.embedding_model.get('model_name')!r}; "
                "its embedding model cannot change. Create a new knowledge base for the new model.",
                title="Embedding model cannot change",
            )
        dim = await self.embedders.dimension(new)
        if dim != kb.vector_dim:
            await chunks.drop_chunk_table(conn, kb.storage_table)
            await chunks.create_chunk_table(conn, kb.storage_table, dim)
        return {"embedding_model": new, "vector_dim": dim,
                "params": {**kb.params, "created_embedding_model": new["model_name"], "vector_size": dim}}

