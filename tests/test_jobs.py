"""Ingestion jobs: async inserts, progress events, cancel, crash recovery, and two workers sharing a queue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import free_port
from tests.helpers import assert_problem, stub_kb
from tests.openai_stub import OpenAIStub, Scripted
from tests.test_serve_restart import serve

P = "/api/projects/mindsdb"


def rows(n: int, prefix: str = "doc") -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{i}", "content": f"{prefix} number {i} about subject {i % 7}"} for i in range(n)]


def wait_for(
    client: httpx.Client, kb: str, job_id: str, states: set[str], timeout: float = 60
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(f"{P}/knowledge_bases/{kb}/jobs/{job_id}").json()
        if job["state"] in states:
            return job  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, job
        time.sleep(0.1)


@pytest.fixture()
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


def test_async_insert_job_runs_and_reports(client: httpx.Client, unique: str, stub: OpenAIStub) -> None:
    kb = f"jobs_{unique}"
    stub_kb(client, kb, stub)
    r = client.put(f"{P}/knowledge_bases/{kb}?async=true", json={"knowledge_base": {"rows": rows(600)}})
    assert r.status_code == 202, r.text
    job_id = r.json()["job_id"]
    job = wait_for(client, kb, job_id, {"succeeded", "failed"})
    assert job["state"] == "succeeded", job
    assert (
        job["mode"] == "async" and job["counts"]["documents"] == 600 and job["counts"]["items_total"] == 600
    )
    assert job["started_at"] and job["finished_at"] and job["duration_s"] >= 0
    assert client.get(f"{P}/knowledge_bases/{kb}").json()["document_count"] == 600
    with client.stream("GET", f"{P}/knowledge_bases/{kb}/jobs/{job_id}/events") as events:
        chunks = [json.loads(line[6:]) for line in events.iter_lines() if line.startswith("data: ")]
    assert chunks[-1]["state"] == "succeeded"

    sync = client.put(
        f"{P}/knowledge_bases/{kb}",
        headers={"Prefer": "respond-async"},
        json={"knowledge_base": {"rows": rows(3, "more")}},
    )
    assert sync.status_code == 202
    plain = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows(2, "plain")}})
    assert plain.status_code == 200 and plain.json() == ""
    listed = client.get(f"{P}/knowledge_bases/{kb}/jobs").json()
    assert plain.headers["x-agentkb-job"] in {j["id"] for j in listed}
    assert {j["mode"] for j in listed} == {"sync", "async"}
    assert_problem(client.get(f"{P}/knowledge_bases/{kb}/jobs/nope"), 404)


def test_failed_job_records_the_reason(client: httpx.Client, unique: str, stub: OpenAIStub) -> None:
    kb = f"jobfail_{unique}"
    stub_kb(client, kb, stub)
    stub.script_embeddings(Scripted(400, {"error": {"message": "model overloaded"}}))
    r = client.put(f"{P}/knowledge_bases/{kb}?async=true", json={"knowledge_base": {"rows": rows(5)}})
    job = wait_for(client, kb, r.json()["job_id"], {"succeeded", "failed"})
    assert job["state"] == "failed" and "model overloaded" in job["error"]
    assert client.get(f"{P}/knowledge_bases/{kb}").json()["document_count"] == 0


def test_cancel_a_running_job(client: httpx.Client, unique: str, stub: OpenAIStub) -> None:
    kb = f"jobcancel_{unique}"
    stub_kb(client, kb, stub)
    stub.hold()  # nothing is embedded until the job is over: it cannot finish before it is cancelled
    r = client.put(f"{P}/knowledge_bases/{kb}?async=true", json={"knowledge_base": {"rows": rows(300)}})
    job_id = r.json()["job_id"]
    wait_for(client, kb, job_id, {"running"})
    cancel = client.delete(f"{P}/knowledge_bases/{kb}/jobs/{job_id}")
    assert cancel.status_code in (200, 202)
    job = wait_for(client, kb, job_id, {"cancelled", "succeeded", "failed"})
    assert job["state"] == "cancelled", job
    assert client.get(f"{P}/knowledge_bases/{kb}").json()["document_count"] == 0  # rolled back whole


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKB_")}
    env.update(extra)
    return env


def test_killed_server_job_resumes_after_restart(data_dir: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}{P}"
    with OpenAIStub() as stub:
        model = stub.embedding_model()
        with serve(
            data_dir, port, env=_env(AGENTKB_JOB_STALE_AFTER_S="2", AGENTKB_JOB_HEARTBEAT_S="0.5")
        ) as proc:
            httpx.post(
                f"{url}/knowledge_bases", json={"knowledge_base": {"name": "kb", "embedding_model": model}}
            )
            stub.hold()  # the first attempt embeds nothing: it cannot finish before it is killed
            job_id = httpx.put(
                f"{url}/knowledge_bases/kb?async=true", json={"knowledge_base": {"rows": rows(1500)}}
            ).json()["job_id"]
            deadline = time.monotonic() + 30
            while httpx.get(f"{url}/knowledge_bases/kb/jobs/{job_id}").json()["state"] != "running":
                assert time.monotonic() < deadline
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        stub.release()
        env = _env(AGENTKB_JOB_STALE_AFTER_S="2", AGENTKB_JOB_HEARTBEAT_S="0.5")
        with (
            serve(data_dir, port, env=env),
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client,
        ):
            job = wait_for(client, "kb", job_id, {"succeeded", "failed"}, timeout=120)
            assert job["state"] == "succeeded" and job["attempts"] == 2, job
            assert client.get(f"{P}/knowledge_bases/kb").json()["document_count"] == 1500


def _running_workers(base: str, kbs: tuple[str, ...]) -> set[str]:
    """The workers of the jobs running now in `kbs`."""
    listed = [j for kb in kbs for j in httpx.get(f"{base}{P}/knowledge_bases/{kb}/jobs").json()]
    return {j["worker"] for j in listed if j["state"] == "running"}


def test_two_workers_drain_one_queue(data_dir: Path) -> None:
    port = free_port()
    env = _env(AGENTKB_WORKER_ENABLED="false")
    with OpenAIStub(delay_s=0.05) as slow, serve(data_dir, port, env=env):
        base = f"http://127.0.0.1:{port}"
        model = slow.embedding_model()
        # Two knowledge bases: inserts into one knowledge base run one at a time (each holds the KB's row
        # for its transaction), so only jobs of different ones can run on both workers at once.
        kbs = ("kb_a", "kb_b")
        for kb in kbs:
            httpx.post(
                f"{base}{P}/knowledge_bases", json={"knowledge_base": {"name": kb, "embedding_model": model}}
            )
        slow.hold()  # every embedding request waits until both workers are busy (below)
        jobs = [
            (
                kbs[i % 2],
                httpx.put(
                    f"{base}{P}/knowledge_bases/{kbs[i % 2]}?async=true",
                    json={"knowledge_base": {"rows": rows(40, f"j{i}_")}},
                ).json()["job_id"],
            )
            for i in range(8)
        ]
        workers = [
            subprocess.Popen(
                [sys.executable, "-m", "agentkb", "worker", "--data-dir", str(data_dir)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(2)
        ]
        try:
            # Each worker runs one job at a time: two jobs running at once under two worker names, both
            # waiting on their embedding request, means both workers took a job, whatever the machine's speed.
            deadline = time.monotonic() + 120
            while len(_running_workers(base, kbs)) < 2 or len(slow.requests) < 2:
                assert time.monotonic() < deadline, "the two workers did not both take a job"
                assert all(w.poll() is None for w in workers), "a worker exited"
                time.sleep(0.05)
            slow.release()
            with httpx.Client(base_url=base, timeout=30) as client:
                done = [
                    wait_for(client, kb, job_id, {"succeeded", "failed"}, timeout=120) for kb, job_id in jobs
                ]
                assert all(j["state"] == "succeeded" and j["attempts"] == 1 for j in done), done
                assert len({j["worker"] for j in done}) == 2  # both workers took jobs
                for kb in kbs:
                    assert client.get(f"{P}/knowledge_bases/{kb}").json()["document_count"] == 4 * 40
                embedded = sum(j["counts"]["embedded"] for j in done)
                assert embedded == 8 * 40  # every chunk embedded exactly once: no job ran twice
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            for worker in workers:
                worker.wait(timeout=30)


def test_cancelled_synchronous_insert_answers_409(
    base_url: str, client: httpx.Client, unique: str, stub: OpenAIStub
) -> None:
    import threading

    kb = f"synccancel_{unique}"
    stub_kb(client, kb, stub)
    stub.hold()  # nothing is embedded until the insert is over: it cannot finish before it is cancelled
    answer: dict[str, httpx.Response] = {}

    def put() -> None:
        with httpx.Client(base_url=base_url, timeout=120) as c:
            answer["r"] = c.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows(300)}})

    thread = threading.Thread(target=put)
    thread.start()
    deadline = time.monotonic() + 30
    while not (
        running := [j for j in client.get(f"{P}/knowledge_bases/{kb}/jobs").json() if j["state"] == "running"]
    ):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    client.delete(f"{P}/knowledge_bases/{kb}/jobs/{running[0]['id']}")
    thread.join(timeout=60)
    assert_problem(answer["r"], 409)
    assert client.get(f"{P}/knowledge_bases/{kb}").json()["document_count"] == 0
