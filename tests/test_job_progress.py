"""How a running job's progress is recorded (`service.job_runner.JobRunner.report`): at most every
`progress_every_s`, always at its end; a cancel request is seen at a record. Real PostgreSQL: a job row of a
real KB, run by a runner of its own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentkb.errors import Conflict
from agentkb.ingest.request import Progress
from agentkb.service.jobs.runner import JobRunner
from agentkb.storage import jobs
from agentkb.storage.db import Database
from agentkb.storage.jobs import JobRow

P = "/api/projects/mindsdb"


async def _job(db: Database, runner: JobRunner, kb: dict[str, Any]) -> JobRow:
    async with db.transaction() as conn:
        return await jobs.create(
            conn,
            job_id=uuid.uuid4().hex,
            project_id=kb["project_id"],
            kb_id=kb["id"],
            mode="sync",
            request={},
            worker=runner.worker_id,
        )


async def _counts(db: Database, job_id: str) -> dict[str, Any]:
    async with db.connect() as conn:
        job = await jobs.get(conn, job_id)
    assert job is not None
    return dict(job.counts)


@pytest.fixture()
def kb(client: httpx.Client, unique: str) -> Iterator[dict[str, Any]]:
    name = f"progress_{unique}"
    created = client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": name}})
    assert created.status_code == 201, created.text
    yield created.json()
    client.delete(f"{P}/knowledge_bases/{name}")


@pytest.mark.parametrize(("every", "seen"), [(0.0, [{"n": 1}, {"n": 2}, {"n": 3}]), (3600.0, [{}, {}, {}])])
async def test_progress_is_recorded_at_most_so_often(
    pg_url: str, kb: dict[str, Any], every: float, seen: list[dict[str, Any]]
) -> None:
    """Batches reported within `progress_every_s` of the last record (or of the start) are not written; the
    job's end writes its counts either way."""
    db = Database(pg_url, pool_size=2)
    observed: list[dict[str, Any]] = []

    async def execute(job: JobRow, progress: Progress) -> None:
        for n in (1, 2, 3):
            await runner.report(progress, {"n": n})
            observed.append(await _counts(db, job.id))

    runner = JobRunner(db, execute, progress_every_s=every)
    try:
        final = await runner.run_job(await _job(db, runner, kb))
        assert observed == seen
        assert final.state == "succeeded" and final.counts == {"n": 3}
    finally:
        await db.close()


@pytest.mark.parametrize(("every", "state"), [(0.0, "cancelled"), (3600.0, "succeeded")])
async def test_a_cancel_is_seen_at_a_record(
    pg_url: str, kb: dict[str, Any], every: float, state: str
) -> None:
    """A cancel requested while the job runs stops it at its next record; with none before its end (and no
    heartbeat due), the job ends as it would have, and the cancel came too late."""
    db = Database(pg_url, pool_size=2)

    async def execute(job: JobRow, progress: Progress) -> None:
        async with db.transaction() as conn:
            assert await jobs.request_cancel(conn, job.id)
        await runner.report(progress, {"n": 1})

    runner = JobRunner(db, execute, progress_every_s=every)
    try:
        job = await _job(db, runner, kb)
        if state == "cancelled":  # a synchronous insert's request is told it was cancelled
            with pytest.raises(Conflict):
                await runner.run_job(job)
        else:
            assert (await runner.run_job(job)).state == "succeeded"
        async with db.connect() as conn:
            ended = await jobs.get(conn, job.id)
        assert ended is not None and ended.state == state
    finally:
        await db.close()
