"""The console's Jobs pages over real HTTP on the session server (whose scheduler polls every second):
create a job with the form, see it listed, run it now, see its run appear, delete it; the form's errors
shown as the other forms' are; a job's statements, IF and LAST values, escaped."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkb.console.jobs import job_view
from agentkb.service.types import SQLJobRow
from tests.test_console import csrf_of

JOBS = "/console/projects/mindsdb/jobs"
OK = "SELECT 1 FROM information_schema.jobs"  # a statement that runs
WAIT_S = 60.0
POLLING = 'hx-trigger="every 2s"'


@pytest.fixture()
def console(base_url: str) -> Iterator[tuple[httpx.Client, str]]:
    """A client holding the console's cookies, and the CSRF token its pages carry."""
    with httpx.Client(base_url=base_url, timeout=60, follow_redirects=True) as client:
        page = client.get(JOBS)
        assert page.status_code == 200, page.text
        yield client, csrf_of(page)


def wait_for(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


def ended_runs(client: httpx.Client, job: str) -> list[str]:
    """The states of the job's ended runs as its page lists them, newest first."""
    page = client.get(f"{JOBS}/{job}")
    assert page.status_code == 200, page.text
    return [s for s in re.findall(r'<tr id="run-\d+" data-state="([a-z_]+)"', page.text) if s != "running"]


def row_of(page: httpx.Response, job: str) -> str:
    found = re.search(rf'<tr id="job-{job}">(.*?)</tr>', page.text, re.S)
    assert found, page.text
    return found.group(1)


def test_create_list_run_now_and_delete(console: tuple[httpx.Client, str], unique: str) -> None:
    client, csrf = console
    job = f"console_job_{unique}"
    listing = client.get(JOBS)
    assert f'href="{JOBS}" aria-current="page">Jobs</a>' in listing.text  # in the navigation
    form = {"name": job, "query": OK, "start": "2999-01-01", "every_count": "2", "every_unit": "hours"}
    made = client.post(JOBS, data={**form, "csrf_token": csrf})
    assert made.status_code == 200 and f"<h1>{job}</h1>" in made.text, made.text  # followed to its page
    assert OK in made.text and "every 2 hours" in made.text and "No run yet." in made.text
    assert "2999-01-01 00:00:00" in made.text and POLLING not in made.text  # nothing due: no polling
    row = row_of(client.get(JOBS), job)
    assert "every 2 hours" in row and "2999-01-01 00:00:00" in row and "—" in row  # no last run

    ran = client.post(f"{JOBS}/{job}/run", data={"csrf_token": csrf, "back": "list"}, follow_redirects=False)
    assert ran.status_code == 303 and ran.headers["location"] == JOBS
    assert wait_for(lambda: ended_runs(client, job), "the run") == ["succeeded"]
    page = client.get(f"{JOBS}/{job}")
    assert POLLING not in page.text  # the run ended and the next is far away: the page stops polling
    row = row_of(client.get(JOBS), job)
    assert "state-succeeded" in row and ">no<" in row, row

    # from the job's page, "Run now" comes back to it; a second run is listed above the first
    again = client.post(f"{JOBS}/{job}/run", data={"csrf_token": csrf}, follow_redirects=False)
    assert again.status_code == 303 and again.headers["location"] == f"{JOBS}/{job}"
    assert wait_for(lambda: len(ended_runs(client, job)) == 2, "the second run")

    gone = client.post(f"{JOBS}/{job}/delete", data={"csrf_token": csrf})
    assert gone.status_code == 200 and gone.url.path == JOBS
    assert f'id="job-{job}"' not in gone.text
    assert client.get(f"/api/projects/mindsdb/jobs/{job}").status_code == 404
    missing = client.get(f"{JOBS}/{job}")
    assert missing.status_code == 404 and f"Job with name {job} does not exist" in missing.text


def test_form_errors_show_in_the_alert_area(console: tuple[httpx.Client, str], unique: str) -> None:
    client, csrf = console
    job = f"console_bad_{unique}"
    htmx = {"HX-Request": "true", "X-CSRF-Token": csrf}
    good = {"name": job, "query": OK, "every_count": "1", "every_unit": "hours", "start": "2999-01-01"}
    for change, expected in (
        ({"query": "SELEC 1"}, "Unable to parse the job&#39;s statement"),
        ({"if_query": "SELEC 1"}, "Unable to parse the job&#39;s IF condition"),
        ({"query": ""}, "A job needs its statements"),
        ({"name": "1 bad"}, "job name"),
        ({"every_count": "0"}, "EVERY needs a positive number"),
        ({"every_count": "x"}, "Can&#39;t read the schedule"),
        ({"start": "tomorrow"}, "Can&#39;t read the START date"),
        ({"end": "2998-01-01"}, "END (2998-01-01) is before its START"),
    ):
        bad = client.post(JOBS, data={**good, **change}, headers=htmx)
        assert bad.status_code == 400 and bad.headers["hx-retarget"] == "#alerts", (change, bad.text)
        assert bad.text.startswith('<div class="alert" role="alert">') and expected in bad.text, (
            change,
            bad.text,
        )
    assert client.get(f"/api/projects/mindsdb/jobs/{job}").status_code == 404  # none was made
    made = client.post(JOBS, data=good, headers=htmx)
    assert made.status_code == 200, made.text
    taken = client.post(JOBS, data=good, headers=htmx)
    assert taken.status_code == 409 and "already exists" in taken.text
    page = client.post(JOBS, data={**good, "csrf_token": csrf})  # without htmx: a page of its own
    assert page.status_code == 409 and 'role="alert"' in page.text and "already exists" in page.text
    refused = client.post(f"{JOBS}/{job}/delete", data={"csrf_token": "x" * 32})
    assert refused.status_code == 403
    assert client.get(f"/api/projects/mindsdb/jobs/{job}").status_code == 200  # not deleted
    assert client.post(f"{JOBS}/{job}/delete", headers=htmx).status_code == 200
    assert client.get(f"/api/projects/mindsdb/jobs/{job}").status_code == 404


@pytest.fixture()
def sqlite_source(client: httpx.Client, unique: str, tmp_path: Path) -> Iterator[str]:
    """A SQLite data source `jsrc_<unique>` with the table notes(id, body) holding notes 1..3."""
    db_file = tmp_path / "notes.db"
    with sqlite3.connect(db_file) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.executemany("INSERT INTO notes VALUES (?, ?)", [(i, f"note {i}") for i in (1, 2, 3)])
    name = f"jsrc_{unique}"
    made = client.post(
        "/api/databases",
        json={"database": {"name": name, "engine": "sqlite", "parameters": {"db_file": str(db_file)}}},
    )
    assert made.status_code in (200, 201), made.text
    yield name
    client.delete(f"/api/databases/{name}")


def test_a_jobs_page_shows_if_last_values_and_escapes(
    console: tuple[httpx.Client, str], unique: str, sqlite_source: str
) -> None:
    client, csrf = console
    job = f"console_last_{unique}"
    query = f"SELECT id, '<script>alert(1)</script>' AS x FROM {sqlite_source}.notes WHERE id > LAST"
    given = {"name": job, "query": query, "start": "2999-01-01", "every_unit": "days"}
    given["if_query"] = f"SELECT * FROM {sqlite_source}.notes WHERE body <> '<b>'"
    made = client.post(JOBS, data={**given, "csrf_token": csrf})
    assert made.status_code == 200, made.text
    assert (
        "<script>alert(1)</script>" not in made.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in made.text
    )
    assert "&lt;&gt; &#39;&lt;b&gt;&#39;" in made.text and "every 1 days" in made.text
    assert "None kept yet." in made.text
    client.post(f"{JOBS}/{job}/run", data={"csrf_token": csrf})
    assert wait_for(lambda: ended_runs(client, job), "the run") == ["succeeded"]
    page = client.get(f"{JOBS}/{job}")
    table = re.search(r'<table id="job-variables">(.*?)</table>', page.text, re.S)
    assert table and re.search(r'<td class="mono">3</td>', table.group(1)), page.text  # LAST is now 3
    client.post(f"{JOBS}/{job}/delete", data={"csrf_token": csrf})


def _job(next_run_at: datetime | None, running: int | None) -> SQLJobRow:
    now = datetime.now(UTC)
    return SQLJobRow(
        id=1, project_id=1, project_name="p", name="j", query=OK, if_query=None, start_at=now, end_at=None,
        schedule_str="every 1 hours", next_run_at=next_run_at, run_projects=None, created_by=None,
        running_run_id=running, running_worker=None, heartbeat_at=None, created_at=now, updated_at=now,
        variables={},
    )  # fmt: skip


def test_a_page_polls_while_a_run_is_due_or_running() -> None:
    now = datetime.now(UTC)
    assert job_view(_job(now, None))["live"] and job_view(_job(now - timedelta(hours=1), None))["live"]
    assert job_view(_job(now + timedelta(hours=1), 7))["live"]  # running
    assert not job_view(_job(now + timedelta(hours=1), None))["live"]
    assert not job_view(_job(None, None))["live"]
