"""What an agent run does besides the model and the tools: the first stream chunk leaves before the model
answers, pydantic-ai agents are built once per agent configuration, and traces are stored off the response
path yet readable at once (real HTTP, a real KB, the scripted OpenAI stub as the LLM)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
import pytest

from tests.openai_stub import OpenAIStub, text, tool_call

P = "/api/projects/mindsdb"


@pytest.fixture(scope="module")
def kb(base_url: str) -> str:
    name = f"overhead_kb_{uuid.uuid4().hex[:8]}"
    rows = [{"id": 1, "content": "Emperor penguins huddle together to survive the Antarctic winter."}]
    with httpx.Client(base_url=base_url, timeout=120) as c:
        assert c.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": name}}).status_code == 201
        assert (
            c.put(f"{P}/knowledge_bases/{name}", json={"knowledge_base": {"rows": rows}}).status_code == 200
        )
    return name


def _services(served: Any) -> Any:
    return served.uvicorn.server.config.app.state.services


def _agent(client: httpx.Client, stub: OpenAIStub, kb: str, **fields: Any) -> str:
    name = f"oh_{uuid.uuid4().hex[:8]}"
    model = {"provider": "openai", "model_name": "gpt-stub", "api_key": "sk-test", "base_url": stub.base_url}
    body = {"name": name, "model": model, "data": {"knowledge_bases": [f"mindsdb.{kb}"]}, **fields}
    r = client.post(f"{P}/agents", json={"agent": body})
    assert r.status_code == 201, r.text
    return name


def _ask(question: str) -> dict[str, Any]:
    return {"messages": [{"question": question, "answer": ""}]}


def test_first_chunk_is_sent_before_the_model_answers(
    client: httpx.Client, stub: OpenAIStub, kb: str, base_url: str
) -> None:
    agent = _agent(client, stub, kb)
    stub.reset()
    stub.script(
        tool_call("kb_query_tool", f"SELECT * FROM mindsdb.{kb} WHERE content = 'penguins'"),
        text("Huddling."),
    )
    stub.hold()  # every model request now waits until release()
    try:
        with (
            httpx.Client(base_url=base_url, timeout=30) as c,
            c.stream(
                "POST", f"{P}/agents/{agent}/completions/stream", json=_ask("How do penguins keep warm?")
            ) as r,
        ):
            assert r.status_code == 200
            lines = r.iter_lines()
            first = next(lines)
            # read while the model is held: nothing it answers can have been needed for this chunk
            assert first.startswith("data: ")
            start = json.loads(first[len("data: ") :])
            assert start["type"] == "start" and start["prompt"] == "How do penguins keep warm?"
            deadline = time.monotonic() + 20
            while not any(q.path.endswith("/chat/completions") for q in stub.requests):
                assert time.monotonic() < deadline, "the run never asked the model"
                time.sleep(0.05)
            # the model has been asked and is held unanswered: the chunk above did not wait for it
            stub.release()
            rest = [json.loads(line[len("data: ") :]) for line in lines if line.startswith("data: ")]
    finally:
        stub.release()
    assert [c.get("type") or next(iter(c)) for c in rest] == ["actions", "steps", "output", "end"]
    assert rest[2]["output"] == "Huddling." and rest[2]["trace_id"] == start["trace_id"]


def test_agents_are_built_once_per_configuration(
    client: httpx.Client, stub: OpenAIStub, kb: str, served: Any
) -> None:
    cache = _services(served).completions.agent_cache
    agent = _agent(client, stub, kb, prompt_template="Answer briefly.")
    stub.reset()
    url = f"{P}/agents/{agent}/completions"
    first = client.post(url, json=_ask("Hello?"))
    assert first.status_code == 200, first.text
    built = cache.builds
    for question in ("Again?", "And again?"):
        r = client.post(url, json=_ask(question))
        assert r.status_code == 200 and r.json()["message"]["content"] == stub.chat_answer
    assert cache.builds == built  # the same configuration: the agent built for the first run is reused

    # a changed agent is a new configuration, and its runs use the change
    changed = client.put(f"{P}/agents/{agent}", json={"agent": {"prompt_template": "Answer in French."}})
    assert changed.status_code == 200, changed.text
    r = client.post(url, json=_ask("Bonjour?"))
    assert r.status_code == 200, r.text
    assert cache.builds == built + 1
    system = [m for m in stub.requests[-1].messages if m.get("role") == "system"]
    assert "Answer in French." in system[0]["content"] and "Answer briefly." not in system[0]["content"]


def test_trace_is_readable_at_once_and_stored(
    client: httpx.Client, stub: OpenAIStub, kb: str, served: Any
) -> None:
    writer = _services(served).completions.traces
    agent = _agent(client, stub, kb)
    stub.reset()
    stub.script(
        tool_call("kb_query_tool", f"SELECT * FROM mindsdb.{kb} WHERE content = 'winter'"), text("Huddling.")
    )
    answer = client.post(f"{P}/agents/{agent}/completions", json=_ask("How do penguins survive winter?"))
    assert answer.status_code == 200, answer.text
    trace_id = answer.json()["message"]["trace_id"]
    url = f"{P}/agents/{agent}/traces/{trace_id}"
    at_once = client.get(url)  # right after the answer: stored already, or answered from the writer's queue
    assert at_once.status_code == 200, at_once.text
    deadline = time.monotonic() + 20
    while writer.pending(trace_id) is not None:
        assert time.monotonic() < deadline, "the trace was never written"
        time.sleep(0.05)
    stored = client.get(url)  # now from the database
    assert stored.status_code == 200, stored.text
    assert stored.json() == at_once.json()
    record = stored.json()
    assert record["status"] == "completed" and record["answer"] == "Huddling."
    assert [s["tool"] for s in record["steps"]] == ["kb_query_tool"]
    # another agent's trace id is not this agent's
    other = _agent(client, stub, kb)
    assert client.get(f"{P}/agents/{other}/traces/{trace_id}").status_code == 404
