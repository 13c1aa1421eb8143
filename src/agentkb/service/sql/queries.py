"""MindsDB's queries over agentkb's ingestion jobs: `information_schema.queries`, `SELECT query_cancel(<id>)`,
`SELECT query_resume(<id>)`, the record a background insert answers with, and the insert columns of
`DESCRIBE KNOWLEDGE_BASE` / `information_schema.knowledge_bases`.

A query is a job started by an `INSERT INTO <kb> SELECT ...` statement (MindsDB registers exactly those:
insert-from-select plans). Its integer ID is the job's `query_id`; `query_cancel` cancels the job and takes it
off the list (MindsDB deletes the record), leaving the job itself visible at `/api/.../jobs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest
from agentkb.service.platform import access
from agentkb.service.sql.result import Result, ok, table
from agentkb.storage import jobs
from agentkb.storage.jobs import JobRow
from agentkb.timestamps import optional_timestamp, timestamp

if TYPE_CHECKING:
    from agentkb.service.ingest.service import IngestService

# information_schema.queries (MindsDB's QueriesTable)
QUERY_COLUMNS = [
    "ID",
    "STARTED_AT",
    "FINISHED_AT",
    "PROCESSED_ROWS",
    "ERROR",
    "SQL",
    "DATABASE",
    "PARAMETERS",
    "CONTEXT",
    "UPDATED_AT",
]
# a background insert's answer (MindsDB's RunningQuery.get_info(), keys upper-cased, in its order)
RECORD_COLUMNS = [
    "ID",
    "SQL",
    "DATABASE",
    "STARTED_AT",
    "FINISHED_AT",
    "PARAMETERS",
    "CONTEXT",
    "PROCESSED_ROWS",
    "ERROR",
    "UPDATED_AT",
]
# what a knowledge base's row adds about its last SQL insert (MindsDB's KBTable, 26.1)
KB_QUERY_COLUMNS = ["INSERT_STARTED_AT", "INSERT_FINISHED_AT", "PROCESSED_ROWS", "ERROR", "QUERY_ID"]
FUNCTIONS = ("query_cancel", "query_resume")


def query_row(job: JobRow) -> dict[str, Any]:
    """A job as MindsDB's query record: FINISHED_AT only once it succeeded (MindsDB's `finish()`), ERROR once
    it failed or was cancelled (MindsDB's `on_error()`)."""
    return {
        "ID": job.query_id,
        "STARTED_AT": optional_timestamp(job.started_at),
        "FINISHED_AT": optional_timestamp(job.finished_at) if job.state == "succeeded" else None,
        "PROCESSED_ROWS": int(job.counts.get("processed_rows", 0) or 0),
        "ERROR": job.error if job.state in ("failed", "cancelled") else None,
        "SQL": job.sql,
        "DATABASE": job.sql_database,
        "PARAMETERS": job.request.get("partition") or {},
        "CONTEXT": job.context,
        "UPDATED_AT": timestamp(job.updated_at),
    }


def kb_query_columns(job: JobRow | None) -> dict[str, Any]:
    """INSERT_STARTED_AT … QUERY_ID of a knowledge base whose last SQL insert was `job` (all None when it has
    none, or when `query_cancel` removed it)."""
    if job is None or job.query_removed:
        return dict.fromkeys(KB_QUERY_COLUMNS)
    row = query_row(job)
    return {
        "INSERT_STARTED_AT": row["STARTED_AT"],
        "INSERT_FINISHED_AT": row["FINISHED_AT"],
        "PROCESSED_ROWS": row["PROCESSED_ROWS"],
        "ERROR": row["ERROR"],
        "QUERY_ID": row["ID"],
    }


def record_answer(job: JobRow) -> Result:
    row = query_row(job)
    return table(RECORD_COLUMNS, [[row[c] for c in RECORD_COLUMNS]])


def _query_id(select: ast.Select, name: str) -> int:
    args = select.targets[0].args
    value = args[0].value if len(args) == 1 and isinstance(args[0], ast.Constant) else None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadRequest(f"Give the query's ID: SELECT {name}(<id>) (see information_schema.queries)")
    return value


def query_not_found(query_id: int) -> BadRequest:
    return BadRequest(f"Query not found: {query_id}", title="Query not found")


class SQLQueries:
    def __init__(self, ingest: IngestService) -> None:
        self.ingest = ingest
        self.db = ingest.db

    async def rows(self) -> list[dict[str, Any]]:
        access.require_global("information_schema.queries (the queries of every project)")
        async with self.db.connect() as conn:
            return [query_row(job) for job in await jobs.list_queries(conn)]

    async def for_kbs(self, kb_ids: list[int]) -> dict[int, dict[str, Any]]:
        """KB_QUERY_COLUMNS for each knowledge base (for DESCRIBE KNOWLEDGE_BASE)."""
        async with self.db.connect() as conn:
            last = await jobs.last_queries(conn, kb_ids)
        return {kb_id: kb_query_columns(last.get(kb_id)) for kb_id in kb_ids}

    async def service_function(self, select: ast.Select) -> Result | None:
        """`SELECT query_cancel(<id>)` / `SELECT query_resume(<id>)`; None for any other SELECT."""
        if select.from_table is not None or len(select.targets) != 1:
            return None
        target = select.targets[0]
        if not isinstance(target, ast.Function) or str(target.op).lower() not in FUNCTIONS:
            return None
        name = str(target.op).lower()
        access.require_write(name)
        access.require_global(name)
        query_id = _query_id(select, name)
        if name == "query_cancel":
            async with self.db.transaction() as conn:
                if await jobs.remove_query(conn, query_id) is None:
                    raise query_not_found(query_id)
            return ok()
        async with self.db.transaction() as conn:
            job = await jobs.get_query(conn, query_id)
            if job is None:
                raise query_not_found(query_id)
            if job.state != "failed":
                raise BadRequest(
                    f"Query {query_id} is {job.state}: only a failed query can be resumed",
                    title="Query not resumable",
                )
            job = await jobs.requeue(conn, job.id) or job
        self.ingest.queued.set()
        return record_answer(job)
