"""MindsDB's JOBS on the served agentkb (the session server, whose scheduler polls every second): the
quickstart's sync job with LAST against a SQLite and a PostgreSQL source, IF conditions, failures recorded
while other jobs go on, DROP, the jobs / jobs_history tables, SHOW JOBS, and the statements' errors.

Nothing here is timed: each test waits (generously) for the runs it needs, read from `jobs_history`."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import externals
from tests.helpers import sql, sql_error, sql_ok, sql_rows, stub_kb
from tests.openai_stub import OpenAIStub

WAIT_S = 60.0


def wait_for(check: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def runs(client: httpx.Client, name: str, project: str = "mindsdb") -> list[dict[str, Any]]:
    """The job's finished runs, oldest first."""
    rows = sql_rows(client, f"SELECT * FROM jobs_history WHERE name = '{name}'", db=project)
    return sorted((r for r in rows if r["RUN_END"] is not None), key=lambda r: r["RUN_START"])


def documents(client: httpx.Client, kb: str) -> dict[str, str]:
    """The KB's documents: id → content (every chunk of these short rows is the whole row)."""
    rows = sql_rows(client, f"SELECT id, chunk_content FROM {kb} LIMIT 1000")
    return {str(r["id"]): r["chunk_content"] for r in rows}


@pytest.fixture()
def sqlite_notes(unique: str, client: httpx.Client, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A SQLite data source `src_<unique>` with the table notes(id, body) holding notes 1..3."""
    db_file = tmp_path / "notes.db"
    with sqlite3.connect(db_file) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.executemany("INSERT INTO notes VALUES (?, ?)", [(i, f"note number {i}") for i in (1, 2, 3)])
    name = f"src_{unique}"
    sql_ok(
        client, f'CREATE DATABASE {name} WITH ENGINE = \'sqlite\', PARAMETERS = {{"db_file": "{db_file}"}}'
    )
    yield name, db_file
    sql(client, f"DROP DATABASE IF EXISTS {name}")


def add_notes(db_file: Path, *rows: tuple[int, str]) -> None:
    with sqlite3.connect(db_file) as conn:
        conn.executemany("INSERT OR REPLACE INTO notes VALUES (?, ?)", rows)


def test_quickstart_job_with_last_over_sqlite(
    client: httpx.Client, stub: OpenAIStub, unique: str, sqlite_notes: tuple[str, Path]
) -> None:
    source, db_file = sqlite_notes
    kb, job = f"notes_kb_{unique}", f"kb_sync_{unique}"
    stub_kb(client, kb, stub)
    sql_ok(
        client,
        f"CREATE JOB {job} (INSERT INTO {kb} SELECT id, body AS content FROM {source}.notes WHERE id > LAST) "
        "EVERY 1 second",
    )
    first = wait_for(lambda: runs(client, job), "the first run")[0]
    assert first["ERROR"] is None and first["STATE"] == "succeeded", first
    assert first["INGEST_JOBS"], first  # its insert ran as an ingestion job
    assert set(documents(client, kb)) == {"1", "2", "3"}  # the first run reads everything

    # a row at or below LAST changes at the source; new rows arrive: only the new ones are read
    add_notes(db_file, (2, "note two rewritten"), (4, "note number 4"), (5, "note number 5"))
    wait_for(lambda: set(documents(client, kb)) == {"1", "2", "3", "4", "5"}, "the new rows")
    assert documents(client, kb)["2"] == "note number 2"  # not read again
    later = runs(client, job)
    assert any("id > 3 AND id <= 5" in (r["QUERY"] or "") for r in later), [r["QUERY"] for r in later]
    [row] = sql_rows(client, f"SELECT * FROM jobs WHERE name = '{job}'")
    assert row["SCHEDULE_STR"] == "every 1 seconds" and row["PROJECT"] == "mindsdb"
    assert list(row["VARIABLES"].values()) == [5], row  # LAST as kept for the job
    assert row["NEXT_RUN_AT"] is not None

    # DROP stops it: no run starts after it (the history stays, as MindsDB's)
    sql_ok(client, f"DROP JOB {job}")
    count = len(runs(client, job))
    add_notes(db_file, (6, "note number 6"))
    time.sleep(2.5)
    assert len(runs(client, job)) <= count + 1  # one may have been running when it was dropped
    assert "6" not in documents(client, kb)
    assert sql_rows(client, f"SELECT * FROM jobs WHERE name = '{job}'") == []


def test_quickstart_job_over_postgres(
    client: httpx.Client, stub: OpenAIStub, unique: str, pg_source: dict[str, Any]
) -> None:
    kb, job, source = f"pg_kb_{unique}", f"pg_sync_{unique}", f"pgsrc_{unique}"
    stub_kb(client, kb, stub)
    params = ", ".join(f'"{k}": "{v}"' if isinstance(v, str) else f'"{k}": {v}' for k, v in pg_source.items())
    sql_ok(client, f"CREATE DATABASE {source} WITH ENGINE = 'postgres', PARAMETERS = {{{params}}}")
    rows = [(i, f"postgres note {i}") for i in (1, 2, 3)]
    with externals.table(
        "postgres", pg_source, f"notes_{unique}", "id INT PRIMARY KEY, body TEXT", rows
    ) as table:
        sql_ok(
            client,
            f"CREATE JOB {job} (INSERT INTO {kb} SELECT id, body AS content FROM {source}.{table} "
            "WHERE id > LAST) EVERY 1 second",
        )
        wait_for(lambda: set(documents(client, kb)) == {"1", "2", "3"}, "the first run")
        externals.execute(
            "postgres",
            pg_source,
            f"UPDATE {table} SET body = 'changed' WHERE id = 1",
            f"INSERT INTO {table} VALUES (4, 'postgres note 4')",
        )
        wait_for(lambda: "4" in documents(client, kb), "the new row")
        assert documents(client, kb)["1"] == "postgres note 1"
        sql_ok(client, f"DROP JOB {job}")
    sql(client, f"DROP DATABASE IF EXISTS {source}")


def test_a_failing_job_is_recorded_and_others_go_on(
    client: httpx.Client, stub: OpenAIStub, unique: str, sqlite_notes: tuple[str, Path]
) -> None:
    source, _ = sqlite_notes
    kb, bad, good = f"fail_kb_{unique}", f"bad_{unique}", f"good_{unique}"
    stub_kb(client, kb, stub)
    sql_ok(
        client,
        f"CREATE JOB {bad} (INSERT INTO {kb} SELECT id, body AS content FROM {source}.missing) EVERY 1 second",
    )
    sql_ok(
        client,
        f"CREATE JOB {good} (INSERT INTO {kb} SELECT id, body AS content FROM {source}.notes) EVERY 1 second",
    )
    failed = wait_for(lambda: [r for r in runs(client, bad) if r["ERROR"]], "the failed run")[0]
    assert failed["STATE"] == "failed" and "missing" in failed["ERROR"], failed
    wait_for(lambda: len(runs(client, bad)) >= 2, "the failing job's next run")  # it stays scheduled
    assert all(r["ERROR"] is None for r in runs(client, good))
    assert set(documents(client, kb)) == {"1", "2", "3"}
    for job in (bad, good):
        sql_ok(client, f"DROP JOB {job}")


def test_if_condition_runs_the_job_only_when_it_finds_rows(
    client: httpx.Client, stub: OpenAIStub, unique: str, sqlite_notes: tuple[str, Path]
) -> None:
    source, _ = sqlite_notes
    kb, job = f"if_kb_{unique}", f"if_{unique}"
    stub_kb(client, kb, stub)
    sql_ok(
        client,
        f"CREATE JOB {job} (INSERT INTO {kb} SELECT id, body AS content FROM {source}.notes) EVERY 1 second "
        f"IF (SELECT * FROM {source}.notes WHERE id > 100)",
    )
    skipped = wait_for(lambda: runs(client, job), "a run")[0]
    assert skipped["STATE"] == "skipped" and skipped["ERROR"] is None
    assert documents(client, kb) == {}
    sql_ok(client, f"DROP JOB {job}")


def test_a_job_without_every_runs_once_and_is_gone(
    client: httpx.Client, unique: str, sqlite_notes: tuple[str, Path]
) -> None:
    source, _ = sqlite_notes
    job = f"once_{unique}"
    sql_ok(client, f"CREATE JOB {job} (SELECT * FROM {source}.notes)")
    [run] = wait_for(lambda: runs(client, job), "its run")
    assert run["STATE"] == "succeeded" and run["QUERY"].startswith("SELECT"), run
    wait_for(lambda: sql_rows(client, f"SELECT * FROM jobs WHERE name = '{job}'") == [], "the job's removal")
    time.sleep(1.5)
    assert len(runs(client, job)) == 1


def test_jobs_statements_tables_and_errors(client: httpx.Client, unique: str) -> None:
    job = f"later_{unique}"
    sql_ok(
        client,
        f"CREATE JOB mindsdb.{job} AS (SELECT 1 FROM information_schema.jobs; DROP JOB IF EXISTS nothing_here) "
        "START '2999-01-01 00:00:00' END '2999-02-01' EVERY 2 days",
    )
    [row] = sql_rows(client, f"SHOW JOBS WHERE name = '{job}'")
    assert row["START_AT"] == "2999-01-01 00:00:00.000000" and row["END_AT"] == "2999-02-01 00:00:00.000000"
    assert row["NEXT_RUN_AT"] == row["START_AT"] and row["SCHEDULE_STR"] == "every 2 days"
    assert row["QUERY"] == "SELECT 1 FROM information_schema.jobs; DROP JOB IF EXISTS nothing_here"
    assert [
        r["NAME"] for r in sql_rows(client, f"SELECT NAME FROM information_schema.jobs WHERE name = '{job}'")
    ] == [job]
    assert sql_rows(client, f"SELECT NAME FROM mindsdb.jobs WHERE name = '{job}'") == [{"NAME": job}]
    assert sql_rows(client, f"SELECT * FROM log.jobs_history WHERE name = '{job}'") == []

    assert "already exists" in sql_error(client, f"CREATE JOB {job} (SELECT 1)")
    sql_ok(client, f"CREATE JOB IF NOT EXISTS {job} (SELECT 1)")
    assert "schedule" in sql_error(client, f"CREATE JOB x_{unique} (SELECT 1) EVERY 3 fortnights")
    assert "Unable to parse" in sql_error(client, f"CREATE JOB x_{unique} (SELEC 1)")
    assert "END" in sql_error(
        client, f"CREATE JOB x_{unique} (SELECT 1) START '2999-01-02' END '2999-01-01' EVERY hour"
    )
    assert "does not exist" in sql_error(client, f"DROP JOB nothing_{unique}")
    mirrored_last = f"INSERT INTO k_{unique} SELECT id FROM s.t WHERE id > LAST USING mirror = true"
    assert "mirror cannot be used with LAST" in sql_error(client, f"CREATE JOB x_{unique} ({mirrored_last})")
    # a job's text is stored and shown: no secret may be in it
    secret = 'CREATE DATABASE d WITH ENGINE = \'postgres\', PARAMETERS = {"user": "u", "password": "hunter2"}'
    assert "carries a secret" in sql_error(client, f"CREATE JOB x_{unique} ({secret})")
    assert "hunter2" not in str(sql_rows(client, "SELECT * FROM information_schema.jobs"))
    sql_ok(client, f"DROP JOB IF EXISTS nothing_{unique}")
    assert "LAST" in sql_error(client, "SELECT * FROM information_schema.jobs WHERE name > LAST")
    sql_ok(client, f"DROP JOB {job}")


def test_mindsdb_sdk_jobs(
    base_url: str, client: httpx.Client, unique: str, sqlite_notes: tuple[str, Path]
) -> None:
    """The MindsDB Python SDK's `project.jobs`, unchanged: create (string and `with` forms), list, get,
    get_history, drop."""
    mindsdb_sdk = pytest.importorskip("mindsdb_sdk", reason="install the dev extra: pip install -e '.[dev]'")
    source, _ = sqlite_notes
    project = mindsdb_sdk.connect(base_url).get_project("mindsdb")
    name, later = f"sdk_job_{unique}", f"sdk_later_{unique}"
    job = project.jobs.create(name, query_str=f"SELECT * FROM {source}.notes", repeat_min=60)
    assert job is not None and job.name == name and job.schedule_str == "every 60 minutes"
    assert job.query_str == f"SELECT * FROM {source}.notes"
    with project.jobs.create(later, start_at=datetime(2999, 1, 1), repeat_str="2 hours") as built:
        built.add_query(f"SELECT id FROM {source}.notes")
        built.add_query("SELECT 1 FROM information_schema.jobs")
    assert built.next_run_at == "2999-01-01 00:00:00.000000" and built.schedule_str == "every 2 hours"
    names = {j.name for j in project.jobs.list()}
    assert {name, later} <= names
    assert (
        project.jobs.get(later).query_str
        == f"SELECT id FROM {source}.notes; SELECT 1 FROM information_schema.jobs"
    )

    def finished() -> Any:
        frame = project.jobs.get(name).get_history()
        return [frame] if len(frame) and frame["RUN_END"].notna().all() else None

    [history] = wait_for(finished, "the SDK job's first run")
    assert list(history["STATE"]) == ["succeeded"] and history["ERROR"].isna().all()
    project.jobs.drop(name)
    project.jobs.drop(later)
    with pytest.raises(AttributeError):
        project.jobs.get(name)


def test_jobs_rest(client: httpx.Client, unique: str) -> None:
    """MindsDB's REST for jobs, and agentkb's run-now."""
    base = "/api/projects/mindsdb/jobs"
    name = f"rest_job_{unique}"
    created = client.post(
        base,
        json={
            "job": {
                "name": name,
                "query": "SELECT 1 FROM information_schema.jobs",
                "start_at": "2999-01-01",
                "schedule_str": "every 1 day",
            }
        },
    )
    assert created.status_code == 200, created.text
    record = created.json()
    assert record["name"] == name and record["next_run_at"] == "2999-01-01 00:00:00.000000"
    assert record["schedule_str"] == "every 1 days" and record["running"] is False
    assert client.get(f"{base}/{name}").json()["id"] == record["id"]
    assert name in [j["name"] for j in client.get(base).json()]
    assert client.post(base, json={"job": {"name": name, "query": "SELECT 1"}}).status_code == 409
    bad = client.post(
        base, json={"name": f"x_{unique}", "query": "SELECT 1", "schedule_str": "every blue moon"}
    )
    assert bad.status_code == 400 and "schedule" in bad.json()["detail"]
    assert client.post(base, json={"job": {"name": f"x_{unique}"}}).status_code == 400

    ran = client.post(f"{base}/{name}/run")  # due now: the scheduler runs it within moments
    assert ran.status_code == 200
    runs_ = wait_for(
        lambda: [r for r in client.get(f"{base}/{name}/history").json() if r["run_end"]], "the run"
    )
    assert runs_[0]["state"] == "succeeded" and runs_[0]["query"] == "SELECT 1 FROM information_schema.jobs"
    metrics = client.get("/metrics").text
    assert 'agentkb_sql_job_runs_total{state="succeeded"}' in metrics
    assert "agentkb_sql_job_lag_seconds_count" in metrics and "agentkb_sql_jobs_behind_seconds" in metrics
    after = client.get(f"{base}/{name}").json()
    assert after["next_run_at"] > "2999-01-01"  # the schedule goes on from its grid
    assert client.delete(f"{base}/{name}").status_code == 204
    assert client.get(f"{base}/{name}").status_code == 404
    assert client.delete(f"{base}/{name}").status_code == 404
    # a new job of the same name starts with no runs (SQL's jobs_history keeps the old one's, by name)
    again = client.post(base, json={"job": {"name": name, "query": "SELECT 1", "start_at": "2999-01-01"}})
    assert again.status_code == 200 and client.get(f"{base}/{name}/history").json() == []
    assert sql_rows(client, f"SELECT STATE FROM jobs_history WHERE name = '{name}'") == [
        {"STATE": "succeeded"}
    ]
    assert client.delete(f"{base}/{name}").status_code == 204
    assert client.get("/api/projects/nope_project/jobs").status_code == 404


def test_a_job_runs_any_statement_in_order(
    client: httpx.Client, stub: OpenAIStub, unique: str, sqlite_notes: tuple[str, Path]
) -> None:
    """A job of several statements: a KB insert from a data source, a DELETE on the KB, then an EVALUATE
    of it, run in order in one run."""
    source, _ = sqlite_notes
    kb, job = f"multi_kb_{unique}", f"multi_{unique}"
    stub_kb(client, kb, stub)
    tests = [{"question": "note number 3", "doc_id": "3"}, {"question": "note number 1", "doc_id": "1"}]
    upload = client.put(
        f"/api/files/qa_{unique}", files={"file": ("qa.json", json.dumps(tests), "application/json")}
    )
    assert upload.status_code == 200, upload.text
    sql_ok(
        client,
        f"CREATE JOB {job} (INSERT INTO {kb} SELECT id, body AS content FROM {source}.notes; "
        f"DELETE FROM {kb} WHERE id = 1; EVALUATE KNOWLEDGE_BASE {kb} USING test_table = files.qa_{unique})",
    )
    [run] = wait_for(lambda: runs(client, job), "its run")
    assert run["STATE"] == "succeeded", run
    assert [s.split()[0] for s in run["QUERY"].split("; ")] == ["INSERT", "DELETE", "EVALUATE"]
    assert set(documents(client, kb)) == {"2", "3"}
    [evaluation] = client.get(f"/api/projects/mindsdb/knowledge_bases/{kb}/evaluations").json()
    assert evaluation["metrics"]["total"] == 2 and evaluation["metrics"]["total_found"] == 1, evaluation
    client.delete(f"/api/files/qa_{unique}")
