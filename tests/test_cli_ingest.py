"""`agentkb ingest`: the command run as a subprocess against the served app — files and a crawled site in
one job, a re-run that changes nothing, a failed job, a missing knowledge base, --no-wait, and Ctrl-C."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentkb.cli.ingest_job import items_done, unique_names, upload_name
from tests.helpers import stub_kb
from tests.ingest.fixtures import MARKDOWN, make_csv
from tests.ingest.site import GeneratedSite
from tests.openai_stub import OpenAIStub, Scripted

P = "/api/projects/mindsdb"


def agentkb(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentkb", *map(str, args)],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
    )


def _env() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


def document_count(client: httpx.Client, kb: str) -> int:
    return int(client.get(f"{P}/knowledge_bases/{kb}").json()["document_count"])


@pytest.fixture(scope="module")
def site() -> Iterator[GeneratedSite]:
    with GeneratedSite(30) as served:  # /p/0 links /p/1..10
        yield served


@pytest.fixture()
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


def test_upload_names() -> None:
    assert upload_name(Path("/x/My Report.v2.PDF")) == "my_report"
    assert upload_name(Path("2024-plan.md")) == "f_2024_plan"
    assert upload_name(Path("été.txt")) == "t"
    assert upload_name(Path("...")) == "file"
    assert len(upload_name(Path("a" * 100 + ".csv"))) == 64
    names = [n for _, n in unique_names([Path("a/readme.md"), Path("b/README.txt"), Path("c/readme")])]
    assert names == ["readme", "readme_2", "readme_3"]
    assert (
        items_done({"items_total": 10, "documents": 4, "items_skipped_unchanged": 3, "items_failed": 1}) == 8
    )
    assert items_done({"items_total": 2, "documents": 6}) == 2  # rows with two content columns


def test_files_and_a_site_in_one_job(
    client: httpx.Client, base_url: str, unique: str, tmp_path: Path, site: GeneratedSite, stub: OpenAIStub
) -> None:
    kb = f"cli_{unique}"
    stub_kb(client, kb, stub)
    table = make_csv(tmp_path / f"Prices {unique}.csv")  # uploaded as prices_<unique>
    notes = tmp_path / f"notes-{unique}.md"
    notes.write_text(MARKDOWN)
    args = (
        "ingest",
        kb,
        "--file",
        table,
        "--file",
        notes,
        "--url",
        f"{site.url}/p/0.html",
        "--crawl-depth",
        "1",
        "--server",
        base_url,
    )

    run = agentkb(*args)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "succeeded" in output and f"prices_{unique}" in output, output
    expected = 3 + 3 + 11  # 3 CSV rows, 3 Markdown sections, the start page and its 10 children
    assert document_count(client, kb) == expected
    assert client.get(f"/api/files/prices_{unique}").json()["row_count"] == 3
    assert client.get(f"/api/files/notes_{unique}").json()["original_name"] == notes.name
    jobs = client.get(f"{P}/knowledge_bases/{kb}/jobs").json()
    assert len(jobs) == 1 and jobs[0]["mode"] == "async" and jobs[0]["state"] == "succeeded"
    assert jobs[0]["counts"]["items_total"] == expected

    again = agentkb(*args)  # the uploads are replaced, the site recrawled: nothing changed
    output = again.stdout + again.stderr
    assert again.returncode == 0, output
    assert "replacing the earlier upload" in output and "succeeded" in output, output
    job = client.get(f"{P}/knowledge_bases/{kb}/jobs").json()[0]
    assert job["counts"]["embedded"] == 0 and job["counts"]["items_skipped_unchanged"] == 11, job
    assert document_count(client, kb) == expected


def test_failed_job_exits_1_with_its_error(
    client: httpx.Client, base_url: str, unique: str, tmp_path: Path, stub: OpenAIStub
) -> None:
    kb = f"clifail_{unique}"
    stub_kb(client, kb, stub)
    notes = tmp_path / f"fail_{unique}.md"
    notes.write_text(MARKDOWN)
    stub.script_embeddings(Scripted(400, {"error": {"message": "model overloaded [try later]"}}))
    run = agentkb("ingest", kb, "--file", notes, "--server", base_url)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "failed" in output and "model overloaded [try later]" in output, output
    assert document_count(client, kb) == 0


def test_refusals(client: httpx.Client, base_url: str, unique: str, tmp_path: Path) -> None:
    run = agentkb("ingest", f"nope_{unique}", "--url", "http://127.0.0.1:9/", "--server", base_url)
    assert run.returncode == 1 and "does not exist" in run.stdout, run.stdout + run.stderr
    run = agentkb("ingest", "kb", "--server", base_url)
    assert run.returncode == 2 and "--file" in run.stderr, run.stderr
    run = agentkb("ingest", "kb", "--file", tmp_path / "missing.csv", "--server", base_url)
    assert run.returncode == 2, run.stderr
    kb = f"clibad_{unique}"
    client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb}})
    run = agentkb("ingest", kb, "--url", "ftp://example.com/", "--server", base_url)
    assert run.returncode == 1 and "insert refused" in run.stdout, run.stdout
    exe = tmp_path / "tool.exe"
    exe.write_bytes(b"MZ\x90\x00" + bytes(range(256)) * 4)
    run = agentkb("ingest", kb, "--file", exe, "--server", base_url)
    assert run.returncode == 1 and "not supported" in run.stdout, run.stdout
    run = agentkb("ingest", kb, "--url", "http://127.0.0.1:9/", "--server", "http://127.0.0.1:9")
    assert run.returncode == 1 and "cannot reach agentkb" in run.stdout, run.stdout


def test_no_wait_prints_the_job(
    client: httpx.Client, base_url: str, unique: str, tmp_path: Path, stub: OpenAIStub
) -> None:
    kb = f"clinowait_{unique}"
    stub_kb(client, kb, stub)
    notes = tmp_path / f"nowait_{unique}.md"
    notes.write_text(MARKDOWN)
    run = agentkb("ingest", kb, "--file", notes, "--server", base_url, "--no-wait")
    assert run.returncode == 0, run.stdout + run.stderr
    job_id = client.get(f"{P}/knowledge_bases/{kb}/jobs").json()[0]["id"]
    assert job_id in run.stdout and f"/jobs/{job_id}/events" in run.stdout
    deadline = time.monotonic() + 60
    while client.get(f"{P}/knowledge_bases/{kb}/jobs/{job_id}").json()["state"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert document_count(client, kb) == 3


def test_ctrl_c_cancels_the_job(
    client: httpx.Client, base_url: str, unique: str, tmp_path: Path, stub: OpenAIStub
) -> None:
    kb = f"clicancel_{unique}"
    table = tmp_path / f"big_{unique}.csv"
    with table.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "content"])
        writer.writerows([i, f"row {i} about subject {i % 7}"] for i in range(300))
    stub_kb(client, kb, stub)
    stub.hold()  # no embedding is answered while the test runs: the job cannot finish before Ctrl-C
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentkb", "ingest", kb, "--file", str(table), "--server", base_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        seen = []
        for line in proc.stdout:  # one line per state change (or every 2 s) when not on a terminal
            seen.append(line)
            if line.startswith("running:"):
                break
        else:
            raise AssertionError("".join(seen))
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate("y\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = "".join(seen) + out
    assert proc.returncode == 1, output
    assert "Cancel job" in output and "cancelled" in output, output
    assert document_count(client, kb) == 0  # rolled back whole
