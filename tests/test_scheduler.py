"""The jobs' scheduler in process, on a database of its own in the suite's PostgreSQL (no served scheduler
claims these jobs): a run past its timeout fails with that reason; a stopping process hands its running run
back and the next scheduler serves the same tick; a run whose process died is taken over; a slow job's runs
never overlap; and the schedule's arithmetic (grid ticks, missed ticks collapsed, months, END).

The runs are scripted (`Scripted`, a runner that sleeps and records); everything else — claims, leases,
heartbeats, history rows — is the real code on the real database."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentkb.errors import BadRequest
from agentkb.service.catalog import JobInput, SQLJobCatalog
from agentkb.service.scheduler import Scheduler, SQLJobRunner
from agentkb.service.scheduler.run import Outcome
from agentkb.sql import schedule
from agentkb.storage import migrate, sql_jobs
from agentkb.storage import projects as project_rows
from agentkb.storage.db import Database
from agentkb.storage.sql_jobs import SQLJobRow
from tests.secret_helpers import fresh_database

WAIT_S = 60.0


@pytest.fixture(scope="module")
def sched_url(pg_url: str) -> Iterator[str]:
    with fresh_database(pg_url, f"sched_{uuid.uuid4().hex[:8]}") as url:
        migrate.upgrade(url)
        yield url


class Scripted(SQLJobRunner):
    """A run that takes `seconds` and records when it ran (no SQL)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.spans: list[tuple[datetime, datetime]] = []

    async def run(
        self, job: SQLJobRow, tick: datetime, previous_tick: datetime, stored: dict[str, Any]
    ) -> Outcome:
        start = datetime.now(UTC)
        await asyncio.sleep(self.seconds)
        self.spans.append((start, datetime.now(UTC)))
        return Outcome(executed=[job.query])


@pytest.fixture()
async def db(sched_url: str) -> AsyncIterator[Database]:
    database = Database(sched_url, pool_size=4)
    async with database.transaction() as conn:
        await project_rows.ensure(conn, "mindsdb")
    yield database
    await database.close()


def scheduler(db: Database, runner: SQLJobRunner, **options: Any) -> Scheduler:
    settings = {"poll_s": 0.1, "heartbeat_s": 0.2, "stale_after_s": 1.0, **options}
    return Scheduler(db, SQLJobCatalog(db), runner, **settings)


async def history(db: Database, name: str) -> list[Any]:
    async with db.connect() as conn:
        return sorted(await sql_jobs.history(conn, None, name, 1000), key=lambda r: r.id)


async def wait_runs(db: Database, name: str, count: int, state: str | None = None) -> list[Any]:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        runs = [
            r
            for r in await history(db, name)
            if r.run_end is not None and (state is None or r.state == state)
        ]
        if len(runs) >= count:
            return runs
        assert asyncio.get_running_loop().time() < deadline, runs
        await asyncio.sleep(0.1)


async def create(db: Database, name: str, every: str | None = "1 second") -> SQLJobRow:
    return await SQLJobCatalog(db).create("mindsdb", JobInput(name=name, query="SELECT 1", every=every))


async def test_a_run_past_its_timeout_fails_with_the_reason(db: Database) -> None:
    name = f"slow_{uuid.uuid4().hex[:6]}"
    await create(db, name, every=None)
    worker = scheduler(db, Scripted(30), run_timeout_s=0.5)
    assert await worker.run_pending_once() == 1
    [run] = await wait_runs(db, name, 1)
    assert run.state == "failed" and run.error == "timed out after 0.5 s"


async def test_shutdown_hands_the_run_back_and_its_tick_runs_again(db: Database) -> None:
    name = f"handed_{uuid.uuid4().hex[:6]}"
    job = await create(db, name, every="1 hour")
    stopping = scheduler(db, Scripted(30))
    task = asyncio.create_task(stopping.work())
    while not (await history(db, name)):
        await asyncio.sleep(0.05)
    task.cancel()  # as the runtime does on shutdown
    await asyncio.gather(task, return_exceptions=True)
    assert await stopping.hand_back() == 1
    [handed] = await history(db, name)
    assert handed.state == "handed_back" and "handed back" in (handed.error or "")
    async with db.connect() as conn:
        again = await sql_jobs.get_by_id(conn, job.id)
    assert again is not None and again.next_run_at == handed.tick_at and again.running_run_id is None
    runner = Scripted(0)
    assert await scheduler(db, runner).run_pending_once() == 1  # the next process serves the same tick
    runs = await wait_runs(db, name, 2)
    assert [r.state for r in runs] == ["handed_back", "succeeded"] and runs[1].tick_at == handed.tick_at


async def test_a_run_whose_process_died_is_taken_over(db: Database, sched_url: str) -> None:
    name = f"orphan_{uuid.uuid4().hex[:6]}"
    await create(db, name, every="1 hour")
    dead_db = Database(sched_url, pool_size=2)  # the "process" that dies: its connections simply end
    dying = scheduler(dead_db, Scripted(30))
    assert await dying.start_due() == 1
    await asyncio.sleep(0.3)
    for task in list(dying.running):  # killed: no hand-back, no more heartbeats, its lease connection gone
        task.cancel()
    await asyncio.gather(*dying.running, return_exceptions=True)
    await dead_db.close()
    survivor = scheduler(db, Scripted(0))
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not await survivor.run_pending_once():  # its heartbeat turns stale after a second
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.2)
    runs = await wait_runs(db, name, 2)
    assert runs[0].state == "failed" and "process running it stopped" in (runs[0].error or "")
    assert runs[1].state == "succeeded" and runs[1].tick_at == runs[0].tick_at


async def test_a_slow_jobs_runs_never_overlap(db: Database) -> None:
    name = f"overlap_{uuid.uuid4().hex[:6]}"
    await create(db, name, every="1 second")
    runner = Scripted(1.5)
    workers = [scheduler(db, runner), scheduler(db, runner)]  # two processes polling the same job
    tasks = [asyncio.create_task(w.work()) for w in workers]
    await wait_runs(db, name, 3)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for w in workers:
        await w.hand_back()
    spans = sorted(runner.spans)
    assert len(spans) >= 3
    assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:], strict=False)), spans
    ticks = [r.tick_at for r in await history(db, name) if r.state == "succeeded"]
    assert len(ticks) == len(set(ticks))
    await SQLJobCatalog(db).drop("mindsdb", name)


def test_the_schedules_arithmetic() -> None:
    start = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
    every = schedule.parse_every("2 hours")
    assert every.text == "every 2 hours" and schedule.parse_every("every 2 hours") == every
    assert schedule.parse_every("'10 sec'").text == "every 10 seconds"
    assert schedule.parse_every("hour").text == "every 1 hours"
    # after downtime: the first grid tick after now, however many were missed
    assert schedule.next_tick(start, every, start + timedelta(hours=9, minutes=1)) == start + timedelta(
        hours=10
    )
    assert schedule.next_tick(start, every, start) == start + timedelta(hours=2)
    assert schedule.next_tick(start, every, start - timedelta(days=1)) == start  # run early: START still runs
    months = schedule.parse_every("1 month")  # calendar months (relativedelta clamps to the month's end)
    assert schedule.next_tick(start, months, start + timedelta(days=1)) == datetime(
        2026, 2, 28, 12, tzinfo=UTC
    )
    assert schedule.next_tick(start, months, datetime(2026, 5, 1, tzinfo=UTC)) == datetime(
        2026, 5, 31, 12, tzinfo=UTC
    )
    for bad in ("0 hours", "3 fortnights", "every", "1 2 hours", "-1 day"):
        with pytest.raises(BadRequest):
            schedule.parse_every(bad)
    with pytest.raises(BadRequest):
        schedule.parse_date("yesterday", "START")
    assert schedule.split_statements("SELECT ';' AS a; SELECT `x;y` FROM t;") == [
        "SELECT ';' AS a",
        "SELECT `x;y` FROM t",
    ]
    filled = schedule.fill_variables(
        "CREATE TABLE t_{{START_DATE}} (SELECT '{{PREVIOUS_START_DATETIME}}')",
        start,
        start - timedelta(hours=2),
    )
    assert filled == "CREATE TABLE t_2026-01-31 (SELECT '2026-01-31 10:00:00')"
