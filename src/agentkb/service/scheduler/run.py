"""One run of a scheduled job: its IF condition, then its statements in order, through the SQL endpoint's
service, with MindsDB's template variables filled in and LAST resolved (`sql.last`).

The run acts with the scope of the job's creator (`run_projects`); the statements run in the job's project
(`USE` inside a job changes nothing after it). The first statement that fails ends the run with its error,
as in MindsDB; the ones before it stay done (each is its own transaction, and KB inserts are idempotent
upserts, so a re-run repeats them safely). LAST values are kept only when the whole run succeeds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mindsdb_sql_parser import ast

from agentkb.errors import AgentKBError, BadRequest
from agentkb.secrecy import mask_text
from agentkb.service.ingest import started_jobs
from agentkb.service.platform import access
from agentkb.service.platform.access import Principal
from agentkb.service.sql import SQLService
from agentkb.sql import last, schedule
from agentkb.storage.sql_jobs import SQLJobRow

log = logging.getLogger("agentkb.scheduler")


@dataclass
class Outcome:
    """How a run ended: state (succeeded, failed, skipped), its error, the statements it ran (MindsDB's
    QUERY), the LAST values to keep and the ingestion jobs its inserts ran as."""

    state: str = "succeeded"
    error: str | None = None
    executed: list[str] = field(default_factory=list)
    pending: dict[str, Any] = field(default_factory=dict)
    ingest_job_ids: list[str] = field(default_factory=list)

    @property
    def query(self) -> str:
        return "; ".join(self.executed)


@contextmanager
def acting_for(job: SQLJobRow) -> Iterator[None]:
    """The scope the job's creator had: a project key's job reaches its projects only."""
    if job.run_projects is None:
        with access.entered(None):
            yield
        return
    principal = Principal("key", f"job:{job.project_name}.{job.name}", projects=frozenset(job.run_projects))
    with access.entered(principal):
        yield


def _error_text(exc: Exception) -> str:
    text = exc.detail if isinstance(exc, AgentKBError) else f"{type(exc).__name__}: {exc}"
    return mask_text(text)


class SQLJobRunner:
    def __init__(self, sql: SQLService) -> None:
        self.sql = sql

    async def run(
        self, job: SQLJobRow, tick: datetime, previous_tick: datetime, stored: dict[str, Any]
    ) -> Outcome:
        outcome = Outcome()
        with acting_for(job), started_jobs() as ingest_ids:
            try:
                if job.if_query is not None and not await self._condition(
                    job, tick, previous_tick, stored, outcome
                ):
                    outcome.state = "skipped"
                else:
                    for i, sql in enumerate(schedule.split_statements(job.query)):
                        await self._statement(job, sql, str(i), tick, previous_tick, stored, outcome)
            except Exception as exc:  # noqa: BLE001 - recorded in the job's history; other jobs go on
                if not isinstance(exc, AgentKBError):
                    log.exception("job %s.%s failed", job.project_name, job.name)
                outcome.state, outcome.error, outcome.pending = "failed", _error_text(exc), {}
            outcome.ingest_job_ids = list(ingest_ids)
        return outcome

    async def _condition(
        self,
        job: SQLJobRow,
        tick: datetime,
        previous_tick: datetime,
        stored: dict[str, Any],
        outcome: Outcome,
    ) -> bool:
        """MindsDB's IF: the job runs when the last of its statements returns at least one row."""
        assert job.if_query is not None
        rows: list[Any] = []
        for i, sql in enumerate(schedule.split_statements(job.if_query)):
            result = await self._statement(job, sql, f"if:{i}", tick, previous_tick, stored, outcome)
            rows = result.data if result.kind == "table" else []
        return bool(rows)

    async def _statement(
        self,
        job: SQLJobRow,
        sql: str,
        place: str,
        tick: datetime,
        previous_tick: datetime,
        stored: dict[str, Any],
        outcome: Outcome,
    ) -> Any:
        filled = schedule.fill_variables(sql, tick, previous_tick)
        statement = self.sql.parse(filled)
        db = job.project_name

        async def max_of(query: ast.Select) -> Any:
            result = await self.sql.execute_statement(query, db)
            if result.kind != "table" or not result.data:
                return None
            return result.data[0][0]

        if isinstance(statement, ast.Use):
            raise BadRequest(
                "USE has no effect in a job: its statements run in the job's project; name other databases "
                "in full (<database>.<table>)"
            )
        had_last = last.contains_last(statement)
        resolved = await last.resolve(statement, place, stored, max_of)
        outcome.executed.append(resolved.statement.to_string() if had_last else filled)
        result = await self.sql.execute_statement(resolved.statement, db, None, filled)
        outcome.pending.update(resolved.pending)
        return result
