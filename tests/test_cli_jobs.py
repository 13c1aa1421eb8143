"""`agentkb jobs list | history | run`: the command run as a subprocess against the session server (whose
scheduler polls every second) with real jobs — a run followed to its end (the run after the request, not
an earlier one), a failed run's exit status and error, a run-once job removed after its run, and the
server's refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import httpx

from tests.helpers import sql, sql_ok

P = "/api/projects/mindsdb"
OK = "SELECT 1 FROM information_schema.jobs"  # a statement that runs
LATER = "EVERY 1 hour START '2999-01-01'"  # never due by itself: only `jobs run` runs it


def agentkb(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentkb", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "250", "NO_COLOR": "1"},
    )


def as_json(run: subprocess.CompletedProcess[str]) -> Any:
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(run.stdout)


def test_run_wait_list_and_history(client: httpx.Client, base_url: str, unique: str) -> None:
    job = f"cli_job_{unique}"
    sql_ok(client, f"CREATE JOB {job} ({OK}) {LATER}")
    try:
        first = agentkb("jobs", "run", job, "--wait", "--server", base_url)
        assert first.returncode == 0, first.stdout + first.stderr
        assert f"run of {job}" in first.stdout and "succeeded" in first.stdout, first.stdout

        # the run followed is the one after the request, not the job's earlier run
        earlier = as_json(agentkb("jobs", "history", job, "--json", "--server", base_url))
        assert [r["state"] for r in earlier] == ["succeeded"], earlier
        followed = as_json(agentkb("jobs", "run", job, "--wait", "--json", "--server", base_url))
        assert followed["state"] == "succeeded" and followed["run_end"] is not None, followed
        assert followed["tick_at"] > earlier[0]["tick_at"] and followed["run_start"] >= earlier[0]["run_end"]
        runs = client.get(f"{P}/jobs/{job}/history").json()
        assert [r["id"] for r in runs] == [followed["id"], earlier[0]["id"]], runs

        listed = agentkb("jobs", "list", "--server", base_url)
        assert listed.returncode == 0, listed.stderr
        [record] = [
            j for j in as_json(agentkb("jobs", "list", "--json", "--server", base_url)) if j["name"] == job
        ]
        assert record["running"] is False and record["schedule_str"] == "every 1 hours", record
        [line] = [line for line in listed.stdout.splitlines() if job in line]
        assert "every 1 hours" in line and "succeeded" in line and record["next_run_at"][:19] in line, line

        shown = agentkb("jobs", "history", job, "--limit", "1", "--server", base_url)
        assert shown.returncode == 0, shown.stderr
        assert f"runs of {job}" in shown.stdout and shown.stdout.count("succeeded") == 1, shown.stdout
        assert followed["run_start"][:19] in shown.stdout, shown.stdout  # the newest only
    finally:
        sql(client, f"DROP JOB IF EXISTS {job}")


def test_a_failed_run_exits_1_with_its_error(client: httpx.Client, base_url: str, unique: str) -> None:
    job = f"cli_fail_{unique}"
    sql_ok(client, f"CREATE JOB {job} (SELECT * FROM nowhere_{unique}.missing_table) {LATER}")
    try:
        run = agentkb("jobs", "run", job, "--wait", "--server", base_url)
        assert run.returncode == 1, run.stdout + run.stderr
        assert "failed" in run.stdout and "error:" in run.stdout and f"nowhere_{unique}" in run.stdout, (
            run.stdout
        )
        [failed] = client.get(f"{P}/jobs/{job}/history").json()
        assert failed["state"] == "failed" and failed["error"], failed
        listed = agentkb("jobs", "list", "--server", base_url)
        [line] = [line for line in listed.stdout.splitlines() if job in line]
        assert "failed" in line and f"nowhere_{unique}" in line, line
    finally:
        sql(client, f"DROP JOB IF EXISTS {job}")


def test_a_run_once_job_is_followed_after_it_is_removed(
    client: httpx.Client, base_url: str, unique: str
) -> None:
    job = f"cli_once_{unique}"
    sql_ok(client, f"CREATE JOB {job} ({OK}) START '2999-01-01'")  # no schedule: removed after its run
    run = as_json(agentkb("jobs", "run", job, "--wait", "--json", "--server", base_url))
    assert run["state"] == "succeeded" and run["name"] == job, run
    assert client.get(f"{P}/jobs/{job}").status_code == 404
    gone = agentkb("jobs", "history", job, "--server", base_url)
    assert gone.returncode == 1 and f"Job with name {job} does not exist" in gone.stderr, gone.stderr


def test_refusals(base_url: str, unique: str) -> None:
    for args in (
        ("run", f"nope_{unique}"),
        ("run", f"nope_{unique}", "--wait"),
        ("history", f"nope_{unique}"),
    ):
        run = agentkb("jobs", *args, "--server", base_url)
        assert run.returncode == 1, run.stdout + run.stderr
        assert (
            run.stderr.startswith("error: Job not found: ") and f"nope_{unique} does not exist" in run.stderr
        )
    listed = agentkb("jobs", "list", "--project", f"nope_{unique}", "--server", base_url)
    assert listed.returncode == 1 and f"nope_{unique}" in listed.stderr, listed.stderr
    away = agentkb("jobs", "list", "--server", "http://127.0.0.1:9")
    assert away.returncode == 1 and "cannot reach agentkb at http://127.0.0.1:9" in away.stderr, away.stderr
    bad = agentkb("jobs", "history", "x", "--limit", "0", "--server", base_url)
    assert bad.returncode == 2, bad.stderr
