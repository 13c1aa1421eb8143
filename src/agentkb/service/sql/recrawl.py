"""`SELECT kb_recrawl('<kb>')` (or `'<project>.<kb>'`): crawl a knowledge base's URL sources again — the start
URLs and options of its URL inserts — incrementally, removing the pages gone from their sites
(`IngestService.recrawl`). It runs as one ingestion job, in the request (its progress, events and cancel are
a job's; the statement is one of `information_schema.queries` while it runs), and answers one row: the
query's record (as a background insert's, `queries.record_answer`) and the job's counts.
"""

from __future__ import annotations

from typing import Any

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest
from agentkb.service.platform import access
from agentkb.service.sql.context import SQLContext
from agentkb.service.sql.queries import RECORD_COLUMNS, query_row
from agentkb.service.sql.result import Result, table
from agentkb.sql.names import two_part

FUNCTION = "kb_recrawl"
# the job's counters a recrawl answers with, after the query's record
COUNT_COLUMNS = {
    "JOB_ID": None,
    "PAGES": "items_total",
    "PAGES_UNCHANGED": "items_skipped_unchanged",
    "DOCUMENTS_WRITTEN": "documents",
    "DOCUMENTS_DELETED": "documents_deleted",
    "PAGES_FAILED": "items_failed",
}


def _kb_name(select: ast.Select, db: str) -> tuple[str, str]:
    args = select.targets[0].args
    value = args[0].value if len(args) == 1 and isinstance(args[0], ast.Constant) else None
    parts = value.split(".") if isinstance(value, str) else []
    if not 1 <= len(parts) <= 2 or not all(p.strip() for p in parts):
        raise BadRequest(
            f"Give the knowledge base's name as a string: SELECT {FUNCTION}('<kb>') or "
            f"SELECT {FUNCTION}('<project>.<kb>')"
        )
    return two_part(ast.Identifier(parts=[p.strip() for p in parts]), db)


async def kb_recrawl(ctx: SQLContext, select: ast.Select, db: str) -> Result | None:
    """`SELECT kb_recrawl('<kb>')`; None for any other SELECT."""
    if select.from_table is not None or len(select.targets) != 1:
        return None
    target = select.targets[0]
    if not isinstance(target, ast.Function) or str(target.op).lower() != FUNCTION:
        return None
    access.require_write(FUNCTION)
    project, name = _kb_name(select, db)
    job = await ctx.ingest.recrawl(project, name, sql=select.to_string(), sql_database=db)
    record = query_row(job)
    counts: dict[str, Any] = {
        column: job.id if key is None else int(job.counts.get(key, 0) or 0)
        for column, key in COUNT_COLUMNS.items()
    }
    row = [record[c] for c in RECORD_COLUMNS] + list(counts.values())
    return table([*RECORD_COLUMNS, *COUNT_COLUMNS], [row])
