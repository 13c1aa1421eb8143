"""Stopping agentkb: SIGTERM while clients follow event streams, a second signal, `agentkb worker`.

The jobs here are long by construction, not by timing: their knowledge base embeds through `GatedStub`, an
OpenAI-compatible server that holds every request until the test releases it. A job whose first embedding
request the stub holds is running, inside its transaction, for as long as the test wants.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import free_port
from tests.helpers import Graceful, wait_serving
from tests.openai_stub import OpenAIStub, text
from tests.test_serve_restart import _postgres_running

P = "/api/projects/mindsdb"
ROWS = 40


class GatedStub(OpenAIStub):
    """Holds every request from the start until `open()`; `wait_held()` returns once an embedding request is
    being held."""

    def __init__(self) -> None:
        super().__init__()
        self.hold()

    def wait_held(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not any(r.path.endswith("/embeddings") for r in self.requests):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def open(self) -> None:
        self.release()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKB_")}
    env.update(extra)
    return env


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:  # a file, not a pipe: a pipe nobody reads would block a chatty server
        return subprocess.Popen([sys.executable, "-m", "agentkb", *args], env=env, stdout=out, stderr=out)


@contextmanager
def serve(data_dir: Path, port: int, log: Path, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    proc = _start(["serve", "--data-dir", str(data_dir), "--port", str(port)], log, _env(**env))
    try:
        wait_serving(
            proc,
            f"http://127.0.0.1:{port}/health",
            90,
            lambda: f"server exited at start-up ({proc.returncode}):\n{log.read_text()[-4000:]}",
        )
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def rows(n: int) -> list[dict[str, Any]]:
    return [{"id": f"doc{i}", "content": f"document number {i} about subject {i % 7}"} for i in range(n)]


def gated_kb(client: httpx.Client, stub: OpenAIStub, name: str = "kb") -> None:
    model = {
        "provider": "openai",
        "model_name": "stub",
        "base_url": stub.url,
        "dimensions": 8,
        "api_key": "k",
    }
    r = client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": name, "embedding_model": model}})
    assert r.status_code == 201, r.text


def queue_job(client: httpx.Client, n: int = ROWS) -> str:
    r = client.put(f"{P}/knowledge_bases/kb?async=true", json={"knowledge_base": {"rows": rows(n)}})
    assert r.status_code == 202, r.text
    return str(r.json()["job_id"])


def wait_for_state(
    client: httpx.Client, job_id: str, states: set[str], timeout: float = 120
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job: dict[str, Any] = client.get(f"{P}/knowledge_bases/kb/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.1)


class EventFollower(threading.Thread):
    """Follows `GET .../jobs/{id}/events` in a thread; `events` are the records received, in order."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.events: list[dict[str, Any]] = []
        self.ended = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with httpx.stream("GET", self.url, timeout=httpx.Timeout(30, read=None)) as r:
                assert r.status_code == 200, r.read()
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        self.events.append(json.loads(line[6:]))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.ended.set()


def test_sigterm_ends_a_job_stream_hands_the_job_back_and_it_resumes(data_dir: Path) -> None:
    grace_s = 10.0
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = data_dir / "server.log"
    with GatedStub() as stub, httpx.Client(base_url=base, timeout=30) as client:
        with serve(data_dir, port, log, AGENTKB_SHUTDOWN_GRACE_S=str(grace_s)) as proc:
            gated_kb(client, stub)
            job_id = queue_job(client)
            assert stub.wait_held(60), "the job never asked for embeddings"
            follower = EventFollower(f"{base}{P}/knowledge_bases/kb/jobs/{job_id}/events")
            follower.start()
            deadline = time.monotonic() + 30
            while not follower.events:
                assert time.monotonic() < deadline and not follower.ended.is_set(), follower.error
                time.sleep(0.05)
            assert follower.events[0]["state"] == "running"

            signalled = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            assert follower.ended.wait(grace_s), "the event stream stayed open after SIGTERM"
            stream_ended_s = time.monotonic() - signalled
            returncode = proc.wait(timeout=grace_s + 30)
            exit_s = time.monotonic() - signalled
        print(f"SIGTERM → event stream ended in {stream_ended_s:.2f} s, process exited in {exit_s:.2f} s")

        # a clean exit: uvicorn re-raises the SIGTERM it handled (the grace deadline would exit with 1)
        assert returncode == -signal.SIGTERM, (returncode, log.read_text()[-3000:])
        assert exit_s < grace_s, exit_s
        assert not _postgres_running(data_dir / "pg"), "the runtime did not close: PostgreSQL still runs"
        assert follower.error is None, follower.error
        last = follower.events[-1]
        assert last["shutdown"] is True and "shutting down" in last["detail"], last
        assert last["state"] == "queued" and last["worker"] is None and last["attempts"] == 0, last
        assert all(e["state"] == "running" for e in follower.events[:-1]), follower.events

        stub.open()  # the restarted server's embeddings are answered at once
        with serve(data_dir, port, log):
            job = wait_for_state(client, job_id, {"succeeded", "failed", "cancelled"})
            kb = client.get(f"{P}/knowledge_bases/kb").json()
    # handed back, not taken over as stale: the interrupted attempt does not count
    assert job["state"] == "succeeded" and job["attempts"] == 1, job
    # the first attempt's transaction rolled back: every chunk was embedded (once) by the second
    assert job["counts"]["documents"] == ROWS and job["counts"]["embedded"] == ROWS, job
    assert kb["document_count"] == ROWS and kb["chunk_count"] == ROWS, kb


def test_a_second_signal_exits_at_once(data_dir: Path) -> None:
    """A synchronous insert held by the stub keeps uvicorn waiting (half of a 60 s grace period)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = data_dir / "server.log"
    with (
        GatedStub() as stub,
        httpx.Client(base_url=base, timeout=30) as client,
        serve(data_dir, port, log, AGENTKB_SHUTDOWN_GRACE_S="60") as proc,
    ):
        gated_kb(client, stub)

        def insert() -> None:
            with contextlib.suppress(httpx.HTTPError):
                httpx.put(
                    f"{base}{P}/knowledge_bases/kb", json={"knowledge_base": {"rows": rows(5)}}, timeout=120
                )

        threading.Thread(target=insert, daemon=True).start()
        assert stub.wait_held(60), "the insert never asked for embeddings"
        proc.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):  # the first signal waits for the insert
            proc.wait(timeout=2)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        returncode = proc.wait(timeout=30)
        exit_s = time.monotonic() - signalled
    print(f"second SIGTERM → exit in {exit_s:.2f} s")
    assert returncode == 128 + signal.SIGTERM, (returncode, log.read_text()[-3000:])
    assert exit_s < 5, exit_s
    assert "second SIGTERM: exiting at once" in log.read_text()


def test_worker_sigterm_hands_its_job_back(data_dir: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = data_dir / "server.log"
    env = {"AGENTKB_WORKER_ENABLED": "false", "AGENTKB_SHUTDOWN_GRACE_S": "10"}
    with (
        GatedStub() as stub,
        httpx.Client(base_url=base, timeout=30) as client,
        serve(data_dir, port, log, **env),
    ):
        gated_kb(client, stub)
        job_id = queue_job(client)
        worker = _start(["worker", "--data-dir", str(data_dir)], data_dir / "worker.log", _env(**env))
        try:
            assert stub.wait_held(90), "the worker never ran the job"
            assert wait_for_state(client, job_id, {"running"})["attempts"] == 1
            signalled = time.monotonic()
            worker.send_signal(signal.SIGTERM)
            returncode = worker.wait(timeout=40)
            exit_s = time.monotonic() - signalled
        finally:
            if worker.poll() is None:
                worker.kill()
        print(f"worker: SIGTERM → exit in {exit_s:.2f} s")
        assert returncode == 0 and exit_s < 10, (returncode, exit_s)
        job = client.get(f"{P}/knowledge_bases/kb/jobs/{job_id}").json()
        assert job["state"] == "queued" and job["worker"] is None and job["attempts"] == 0, job

        stub.open()
        worker = _start(["worker", "--data-dir", str(data_dir)], data_dir / "worker.log", _env(**env))
        try:
            job = wait_for_state(client, job_id, {"succeeded", "failed", "cancelled"})
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=40)
        assert job["state"] == "succeeded" and job["attempts"] == 1, job
        assert client.get(f"{P}/knowledge_bases/kb").json()["document_count"] == ROWS


def test_shutdown_ends_an_agent_stream_with_an_error_and_end(settings: Any) -> None:
    """The server's own shutdown path (uvicorn's `should_exit`, as a signal sets it), in a thread."""
    app_settings = settings.model_copy(update={"worker_enabled": False})
    with (
        OpenAIStub() as llm,
        Graceful(app_settings) as served,
        httpx.Client(base_url=served.url, timeout=30) as c,
    ):
        model = {"provider": "openai", "model_name": "gpt-stub", "api_key": "sk-x", "base_url": llm.base_url}
        name = f"stopping_{os.getpid()}_{free_port()}"
        assert c.post(f"{P}/agents", json={"agent": {"name": name, "model": model}}).status_code == 201
        llm.script(text("too late", delay=8))
        body = {"messages": [{"question": "slow", "answer": ""}]}
        with c.stream("POST", f"{P}/agents/{name}/completions/stream", json=body) as r:
            lines = (line for line in r.iter_lines() if line)
            first = json.loads(next(lines).removeprefix("data: "))
            assert first["type"] == "start"
            deadline = time.monotonic() + 10
            while not llm.requests:  # the model request is in flight
                assert time.monotonic() < deadline
                time.sleep(0.05)
            stopped = time.monotonic()
            served.uvicorn.server.should_exit = True
            rest = [json.loads(line.removeprefix("data: ")) for line in lines]
            ended_s = time.monotonic() - stopped
        served.uvicorn.thread.join(timeout=30)
        assert not served.uvicorn.thread.is_alive()
    print(f"agent stream ended {ended_s:.2f} s after the shutdown began")
    assert rest == [
        {
            "type": "error",
            "content": "The server is shutting down; the agent run was stopped before it finished",
            "error_type": "general",
            "trace_id": first["trace_id"],
        },
        {"type": "end"},
    ], rest
    assert ended_s < 6, ended_s  # not after the model's 8 s answer
