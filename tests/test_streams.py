"""Every server-sent event stream (the MindsDB agent stream, `/v1` chat chunks, job events, the console's
chat and job events) has one lifecycle (`service.platform.streams`): the same headers, and when the server shuts
down each ends at once with its own final event.

The streams stay open by construction, not by timing: the agent's model and the knowledge base's embedder
are an `OpenAIStub` that holds every request until the test releases it, so no run or job can finish."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx

from tests.conftest import free_port
from tests.helpers import Graceful
from tests.openai_stub import OpenAIStub

P = "/api/projects/mindsdb"
SHUTDOWN = "The server is shutting down; the agent run was stopped before it finished"
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def _data(lines: Iterator[str]) -> Iterator[Any]:
    """Each `data:` payload, JSON-decoded (`[DONE]` as the string)."""
    for line in lines:
        if line.startswith("data: "):
            payload = line.removeprefix("data: ")
            yield payload if payload == "[DONE]" else json.loads(payload)


def test_every_stream_sends_the_same_headers_and_ends_with_its_final_event_on_shutdown(
    settings: Any,
) -> None:
    app_settings = settings.model_copy(update={"worker_enabled": False})
    unique = f"{os.getpid()}_{free_port()}"
    kb, agent = f"streams_kb_{unique}", f"streams_agent_{unique}"
    question = {"question": "anything", "answer": ""}
    with (
        OpenAIStub() as stub,
        Graceful(app_settings) as served,
        httpx.Client(base_url=served.url, timeout=30) as c,
        ExitStack() as streams,
    ):
        made = c.post(
            f"{P}/knowledge_bases",
            json={"knowledge_base": {"name": kb, "embedding_model": stub.embedding_model()}},
        )
        assert made.status_code == 201, made.text
        made = c.post(f"{P}/agents", json={"agent": {"name": agent, "model": stub.chat_model()}})
        assert made.status_code == 201, made.text
        csrf = CSRF.search(c.get("/console/projects/mindsdb/knowledge_bases").text)
        assert csrf is not None
        stub.hold()  # from here no model or embedding request is answered until the end
        streams.callback(stub.release)
        queued = c.put(
            f"{P}/knowledge_bases/{kb}?async=true",
            json={"knowledge_base": {"rows": [{"id": "d1", "content": "a document"}]}},
        )
        assert queued.status_code == 202, queued.text
        job_id = queued.json()["job_id"]
        requests = {
            "agent": ("POST", f"{P}/agents/{agent}/completions/stream", {"json": {"messages": [question]}}),
            "openai": (
                "POST",
                "/v1/chat/completions",
                {
                    "json": {
                        "model": agent,
                        "messages": [{"role": "user", "content": "anything"}],
                        "stream": True,
                    }
                },
            ),
            "console chat": (
                "POST",
                f"/console/projects/mindsdb/agents/{agent}/chat",
                {
                    "data": {"question": "anything", "history": "[]"},
                    "headers": {"X-CSRF-Token": csrf.group(1)},
                },
            ),
            "job": ("GET", f"{P}/knowledge_bases/{kb}/jobs/{job_id}/events", {}),
            "console job": (
                "GET",
                f"/console/projects/mindsdb/knowledge_bases/{kb}/jobs/{job_id}/events",
                {},
            ),
        }
        opened: dict[str, httpx.Response] = {}
        events: dict[str, Iterator[Any]] = {}
        firsts: dict[str, Any] = {}
        for kind, (method, url, extra) in requests.items():
            opened[kind] = streams.enter_context(c.stream(method, url, **extra))
            assert opened[kind].status_code == 200, (kind, opened[kind].read())
            events[kind] = _data(opened[kind].iter_lines())
            firsts[kind] = next(events[kind])  # the stream is live: its first event came
        served.uvicorn.server.should_exit = True
        rests = {kind: list(events[kind]) for kind in requests}
        served.uvicorn.thread.join(timeout=30)
        assert not served.uvicorn.thread.is_alive()

    for kind, response in opened.items():
        headers = response.headers
        assert headers["content-type"].startswith("text/event-stream"), (kind, headers)
        assert (headers["cache-control"], headers["x-accel-buffering"]) == ("no-cache", "no"), (kind, headers)

    trace_id = firsts["agent"]["trace_id"]
    assert firsts["agent"]["type"] == "start" and trace_id
    assert rests["agent"] == [
        {"type": "error", "content": SHUTDOWN, "error_type": "general", "trace_id": trace_id},
        {"type": "end"},
    ]

    assert firsts["openai"]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    *_, error, done = rests["openai"]
    assert error == {"error": {"message": SHUTDOWN, "type": "server_error", "param": None, "code": None}}
    assert done == "[DONE]"

    chat_trace = firsts["console chat"]["trace_id"]
    assert firsts["console chat"]["kind"] == "start"
    assert rests["console chat"] == [
        {"content": SHUTDOWN, "error_type": "general", "trace_id": chat_trace, "kind": "error"},
        {"kind": "end"},
    ]

    assert firsts["job"]["id"] == job_id and firsts["job"]["state"] in {"queued", "running"}
    last = rests["job"][-1]
    assert last["id"] == job_id and last["shutdown"] is True and "shutting down" in last["detail"]

    assert firsts["console job"]["id"] == job_id and not firsts["console job"]["finished"]
    last = rests["console job"][-1]
    assert last["id"] == job_id and last["shutdown"] is True and not last["finished"]
