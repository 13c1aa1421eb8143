"""Agent run traces written off the response path: a run hands its finished trace to `TraceWriter.submit`
and goes on (its `end` chunk does not wait for the database); one background task writes every trace
handed in meanwhile in one transaction (one multi-row INSERT).

Until a trace is written, `pending(trace_id)` has it, so that this process answers
`GET .../traces/{trace_id}` at once, even right after the run. `aclose()` (the services' shutdown)
writes what is left. A batch that fails is written trace by trace, so that one bad trace (its agent
deleted meanwhile) loses only itself; a trace never breaks an answer.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agentkb.storage import traces
from agentkb.storage.db import Database

log = logging.getLogger("agentkb.completions")

CLOSE_GRACE_S = 10.0


class TraceWriter:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._pending: dict[str, dict[str, Any]] = {}  # trace id -> record, in submission order
        self._task: asyncio.Task[None] | None = None

    def pending(self, trace_id: str) -> dict[str, Any] | None:
        """The record of a trace handed in but not yet written (None: none such)."""
        return self._pending.get(trace_id)

    def submit(self, record: dict[str, Any]) -> None:
        """Queue a trace's `agent_traces` row; the writer task stores it soon after."""
        self._pending[record["trace_id"]] = record
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._write(), name="agentkb-trace-writer")

    async def _write(self) -> None:
        while self._pending:
            batch = dict(self._pending)
            try:
                await self._insert(list(batch.values()))
            except Exception:  # noqa: BLE001 - one by one, so that a bad trace loses only itself
                for record in batch.values():
                    try:
                        await self._insert([record])
                    except Exception:
                        log.exception("could not store trace %s", record["trace_id"])
            for trace_id, record in batch.items():
                if self._pending.get(trace_id) is record:  # not replaced by a newer version meanwhile
                    del self._pending[trace_id]

    async def _insert(self, records: list[dict[str, Any]]) -> None:
        async with self.db.transaction() as conn:
            await traces.insert_many(conn, records)

    async def aclose(self) -> None:
        """Write what is pending (at most `CLOSE_GRACE_S`)."""
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=CLOSE_GRACE_S)
        elif self._pending:
            self._task = asyncio.get_running_loop().create_task(self._write())
            await asyncio.wait({self._task}, timeout=CLOSE_GRACE_S)
