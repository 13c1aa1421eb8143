"""Inserting into a knowledge base (spec 4.5): settings from `params`, then rows → files → urls → query,
all in one transaction: an insert is applied whole or not at all. Every insert is a job (`jobs.runner`).
New chunks are written outside the HNSW index; after the insert commits, `vector_merge` merges them in the
background once there are enough (`storage.vector_index`).

An insert's `params` may set a new `embedding_model` / `reranking_model`: a secret sent as `******` keeps
the knowledge base's stored one, and secrets are sealed before the job (and its request) is stored."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.errors import BadRequest
from agentkb.ingest.mirror import ReturnedDocuments
from agentkb.ingest.pipeline import IngestStats
from agentkb.ingest.request import (
    DocumentSource,
    InsertInput,
    Progress,
    RowStream,
    SourceRun,
    check_query,
    check_rows,
    column_spec,
    query_batches,
    row_batches,
)
from agentkb.secrecy import restore_masked
from agentkb.service.catalog import kb_admin, kb_lookup, kb_params
from agentkb.service.ingest.partitions import PartitionedInserts
from agentkb.service.ingest.query_sources import check_whole_select
from agentkb.service.ingest.writer import ChunkWriter
from agentkb.service.jobs.runner import JobRunner
from agentkb.service.platform import access
from agentkb.storage import crawl_state, jobs
from agentkb.storage import knowledge_bases as repo
from agentkb.storage.db import Database
from agentkb.storage.jobs import JobRow
from agentkb.storage.knowledge_bases import KnowledgeBaseRow
from agentkb.validation import check_dict, check_storable

_started: ContextVar[list[str] | None] = ContextVar("agentkb_started_jobs", default=None)


@contextmanager
def started_jobs() -> Iterator[list[str]]:
    """The ids of the ingestion jobs submitted inside the block (a scheduled job's run links its inserts)."""
    collected: list[str] = []
    token = _started.set(collected)
    try:
        yield collected
    finally:
        _started.reset(token)


class IngestService:
    """Every insert is a job: `submit(wait=True)` runs it in the request (the spec's synchronous insert);
    `submit(wait=False)` queues it for a worker (`jobs.service.JobService.work`)."""

    def __init__(
        self,
        db: Database,
        writer: ChunkWriter,
        data_sources: RowStream,
        partitions: PartitionedInserts,
        document_sources: Mapping[str, DocumentSource],
        *,
        heartbeat_s: float = 5.0,
        session_db: Database | None = None,
    ) -> None:
        """`data_sources`: the rows of an insert's query; `partitions`: partitioned SQL inserts;
        `document_sources`: where `files` and `urls` inserts read their documents; `session_db`: where the
        job leases are held (default `db`)."""
        self.db = db
        self.writer = writer
        self.data_sources = data_sources
        self.partitions = partitions
        self.document_sources = dict(document_sources)
        self.runner = JobRunner(db, self._execute, heartbeat_s=heartbeat_s, lease_db=session_db)
        self.queued = asyncio.Event()  # set when an async job is queued, to wake the in-process worker

    async def _validate(self, given: InsertInput) -> dict[str, Any]:
        request: dict[str, Any] = {}
        if given.rows is not None:
            request["rows"] = check_rows(given.rows)
        if given.query is not None:
            request["query"] = check_query(given.query)
        for key in ("files", "urls"):
            if getattr(given, key) is not None:
                source = self.document_sources.get(key)
                if source is None:
                    raise BadRequest(
                        f"Inserting '{key}' is not supported by this server", title="Unsupported insert"
                    )
                request.update(await source.validate(given))
        for key in ("params", "preprocessing", "options", "partition"):
            if getattr(given, key) is not None:
                request[key] = check_dict(getattr(given, key), key)
        if "params" in request:  # the settings an insert may change (`_apply_settings`), no other
            settable = (*kb_admin.SETTING_KEYS, *kb_params.CHUNKING_KEYS)
            kb_params.check_keys(
                {k: v for k, v in request["params"].items() if v is not None}, settable, "an insert's params"
            )
        if given.mirror is not None and _mirrored(given):
            request["mirror"] = True
        if given.recrawl is not None:
            if request or "urls" not in self.document_sources:
                raise BadRequest("A recrawl crawls the knowledge base's own URL sources, nothing else")
            request["recrawl"] = True
        if not request:
            raise BadRequest(
                "Nothing to insert: give 'rows', 'query', 'files' or 'urls'", title="Missing parameter"
            )
        # kept as a job's request (its rows were checked above)
        check_storable({k: v for k, v in request.items() if k != "rows"}, "knowledge_base")
        return request

    async def submit(
        self,
        project_name: str,
        kb_name: str,
        given: InsertInput,
        *,
        wait: bool = True,
        sql: str | None = None,
        sql_database: str | None = None,
    ) -> JobRow:
        """`sql` (and `sql_database`): the SQL statement this insert runs, which makes it one of MindsDB's
        queries (`information_schema.queries`). The caller's scope is checked here, before anything is
        queued: the worker that runs a queued job acts for nobody in particular."""
        access.require_write("inserting into a knowledge base")
        access.require_project(project_name)
        if given.files or given.query:  # uploaded files and data sources are global
            access.require_global("inserting from uploaded files or data sources")
        request = await self._validate(given)
        if given.partition is not None and (given.query is None or wait):
            raise BadRequest("A partitioned insert reads a query and runs in the background")
        # the look-up and the job's row need no transaction in common (the row's foreign key refuses a KB
        # dropped meanwhile); forgetting old queries goes with the new one
        async with self.db.transaction() if sql is not None else self.db.autocommitted() as conn:
            kb = await kb_lookup.find(conn, project_name, kb_name)
            if request.get("recrawl") and not await crawl_state.has_sources(conn, kb.id):
                raise BadRequest(
                    f"Knowledge base {project_name}.{kb_name} has no URL sources to recrawl: insert 'urls' "
                    "into it first",
                    title="Nothing to recrawl",
                )
            if "params" in request:
                kb_admin.check_secrets(kb, check_dict(request["params"], "params"))
                stored = {"embedding_model": kb.embedding_model, "reranking_model": kb.reranking_model}
                request["params"] = self.writer.box.seal(restore_masked(request["params"], stored))
            if "preprocessing" in request:  # a contextual LLM's key: sealed as the job's request is stored
                kb_admin.check_secrets(kb, {"preprocessing": request["preprocessing"]})
                stored_preprocessing = kb.params.get("preprocessing") or {}
                request["preprocessing"] = self.writer.box.seal(
                    restore_masked(request["preprocessing"], stored_preprocessing)
                )
            if sql is not None:
                await jobs.forget_old_queries(conn)
            job = await jobs.create(
                conn,
                job_id=uuid.uuid4().hex,
                project_id=kb.project_id,
                kb_id=kb.id,
                mode="sync" if wait else "async",
                # a synchronous insert runs from this request and never again (a dead one is failed): its
                # rows are not stored with it, which would cost a copy of the request body in PostgreSQL
                request={k: v for k, v in request.items() if k != "rows"} if wait else request,
                worker=self.runner.worker_id if wait else None,
                sql=sql,
                sql_database=sql_database,
            )
        if (collected := _started.get()) is not None:
            collected.append(job.id)
        if not wait:
            self.queued.set()
            return job
        return await self.runner.run_job(dataclasses.replace(job, request=request))

    async def recrawl(
        self, project_name: str, kb_name: str, *, sql: str | None = None, sql_database: str | None = None
    ) -> JobRow:
        """`SELECT kb_recrawl('<kb>')`: the knowledge base's URL sources (the start URLs and options of its
        URL inserts) crawled again incrementally, in one job run in the request; pages gone from the site
        are removed (`ingest.crawl.source`)."""
        given = InsertInput(recrawl=True)
        return await self.submit(project_name, kb_name, given, wait=True, sql=sql, sql_database=sql_database)

    async def insert(self, project_name: str, kb_name: str, given: InsertInput) -> IngestStats:
        """A synchronous insert; its work counts."""
        job = await self.submit(project_name, kb_name, given, wait=True)
        return IngestStats.from_counts(job.counts)

    async def _execute(self, job: JobRow, progress: Progress) -> None:
        given = InsertInput(**job.request)
        if given.partition is not None:  # a batch per transaction: see partitions
            await self.partitions.run(job, progress)
            return
        async with self.db.transaction() as conn:
            kb = await self.writer.lock(conn, job.kb_id)
            kb = await self._apply_settings(conn, kb, given)
            ingestor = self.writer.ingestor(
                conn,
                kb,
                given.options or {},
                on_batch=lambda stats: self.runner.report(progress, stats.as_counts()),
            )
            spec = column_spec(kb)
            if given.rows:
                progress.add_items(len(given.rows))
                await ingestor.run(row_batches(given.rows, spec))
            for key in ("files", "urls"):
                if getattr(given, key) is not None or (key == "urls" and given.recrawl):
                    await ingestor.run(
                        self.document_sources[key].documents(SourceRun(conn, kb, given, spec, progress))
                    )
            if given.query is not None:
                batches = query_batches(self.data_sources, given.query, spec, progress)
                if not given.mirror:
                    await ingestor.run(batches)
                else:  # the deletes come once the whole SELECT is written, in this transaction
                    returned = ReturnedDocuments(conn)
                    await ingestor.run(returned.recording(batches))
                    progress.removed(*await returned.delete_others(kb.storage_table))
            counts = ingestor.stats.as_counts()
            counts["deleted"] += progress.removed_chunks
            progress.counts.update(counts)
            if ingestor.skipped:
                progress.counts["skipped_existing"] = ingestor.skipped
            if counts["written"] or counts["deleted"]:  # a new version: search caches (BM25) rebuild
                await repo.update(conn, kb.id, {}, content=True)
        self.writer.written(kb, ingestor)

    async def _apply_settings(
        self, conn: AsyncConnection, kb: KnowledgeBaseRow, given: InsertInput
    ) -> KnowledgeBaseRow:
        """MindsDB lets an insert's `params` (and `preprocessing`) update the KB's settings: the same
        changes as ALTER KNOWLEDGE_BASE (`kb_admin.apply_settings`), plus `chunk_size` / `chunk_overlap`."""
        # the request's secrets were sealed when the job was stored (and checked against the KB's then):
        # revealed here, they are the caller's own, sent again
        box = self.writer.box
        params = (
            box.reveal(check_dict(given.params, "params"), "insert params")
            if given.params is not None
            else {}
        )
        changes = {k: params[k] for k in kb_admin.SETTING_KEYS if params.get(k) is not None}
        if given.preprocessing is not None:
            changes["preprocessing"] = box.reveal(given.preprocessing, "insert preprocessing")
        kb = await kb_admin.apply_settings(conn, kb, changes, self.writer.embedders, self.writer.box)
        new_params = dict(kb.params)
        for key in ("chunk_size", "chunk_overlap"):
            if key in params:
                new_params[key] = params[key]
        kb_admin.read_chunking(new_params, self.writer.box, kb.name)  # validate before anything is written
        if new_params == kb.params:
            return kb
        await repo.update(conn, kb.id, {"params": new_params}, content=False)
        updated = await repo.get_by_id(conn, kb.id)
        assert updated is not None
        return updated


def _mirrored(given: InsertInput) -> bool:
    """`mirror`, checked: only over a whole `query` (no rows, files or urls beside it, no partitions, no LIMIT
    or LAST in it), whose missing documents it deletes."""
    if not isinstance(given.mirror, bool):
        raise BadRequest("'mirror' must be true or false", title="Invalid insert option")
    if not given.mirror:
        return False
    if given.query is None or any(getattr(given, k) is not None for k in ("rows", "files", "urls")):
        raise BadRequest(
            "'mirror' deletes the documents a SELECT did not return: it takes a 'query' (INSERT INTO <kb> "
            "SELECT ...), and no rows (VALUES), files or urls",
            title="Invalid insert option",
        )
    if given.partition is not None:
        raise BadRequest(
            "USING mirror cannot be used with batch_size: a partitioned insert commits each batch on its own "
            "(and may resume after a failure), so no one transaction sees the whole SELECT to delete by",
            title="Invalid insert option",
        )
    check_whole_select(check_query(given.query))
    return True
