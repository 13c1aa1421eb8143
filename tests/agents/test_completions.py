"""Agent completions over real HTTP: the extractive model, an OpenAI-compatible LLM (a scripted stub), KB and
table tools, the SSE wire format, provider errors, timeouts, flushing, client disconnects and traces."""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests import externals
from tests.helpers import ANIMAL_ROWS, assert_problem, create_agent, kb_with_rows, stub_llm
from tests.openai_stub import OpenAIStub, error, text, tool_call

P = "/api/projects/mindsdb"
KB_COLUMNS = "Output columns: 'id', 'chunk_id', 'chunk_content', 'metadata', 'distance', 'relevance'\n"
CSV_HEADER = "Result in CSV format (dialect is 'excel'):\n"


@pytest.fixture(scope="module")
def kb(base_url: str) -> str:
    return kb_with_rows(base_url, "agent_kb", ANIMAL_ROWS)


def ask(question: str) -> dict[str, Any]:
    return {"messages": [{"question": question, "answer": ""}]}


def decode(raw: str) -> list[dict[str, Any]]:
    """Every chunk is exactly `data: <json.dumps(obj)>` and a blank line."""
    assert raw.endswith("\n\n"), raw[-200:]
    chunks = []
    for block in raw[:-2].split("\n\n"):
        assert block.startswith("data: ") and "\n" not in block, block
        obj = json.loads(block[len("data: ") :])
        assert block == "data: " + json.dumps(obj)
        chunks.append(obj)
    return chunks


def stream(client: httpx.Client, agent: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    r = client.post(f"{P}/agents/{agent}/completions/stream", json=body)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["cache-control"] == "no-cache" and r.headers["x-accel-buffering"] == "no"
    return decode(r.text)


def kinds(chunks: list[dict[str, Any]]) -> list[str]:
    out = []
    for c in chunks:
        out.append(c.get("type") or next(k for k in ("actions", "steps", "output") if k in c))
    return out


# --- (1) the extractive model: no key, no LLM ---------------------------------------------------------


def test_extractive_agent_answers_from_the_kb(client: httpx.Client, unique: str, kb: str) -> None:
    agent = f"ex_{unique}"
    record = create_agent(client, agent, data={"knowledge_bases": [f"mindsdb.{kb}"]})
    assert record["model"]["provider"] == "extractive"
    question = "Which animal is the fastest on land?"

    plain = client.post(f"{P}/agents/{agent}/completions", json=ask(question))
    assert plain.status_code == 200, plain.text
    message = plain.json()["message"]
    assert message["role"] == "assistant" and len(message["trace_id"]) == 32
    assert message["content"].startswith("Based on the knowledge base:\n\n1. The cheetah is the fastest")
    assert f"(source: mindsdb.{kb}, " in message["content"]
    assert any("cheetah" in c["page_content"] for c in message["context"])
    assert {"kind": "kb", "name": f"mindsdb.{kb}"}.items() <= message["sources"][0].items()

    chunks = stream(client, agent, ask(question))
    assert kinds(chunks) == ["start", "actions", "steps", "actions", "steps", "output", "end"]
    tid = chunks[0]["trace_id"]
    assert chunks[0] == {"type": "start", "prompt": question, "trace_id": tid}
    assert chunks[1]["actions"][0]["tool"] == "kb_list_tool"
    assert kb in chunks[2]["steps"][0]["observation"]
    query = chunks[3]["actions"][0]
    assert query["tool"] == "kb_query_tool"
    assert query["tool_input"] == f"SELECT * FROM mindsdb.{kb} WHERE content = '{question}' LIMIT 5"
    assert chunks[4]["steps"][0]["observation"].startswith(KB_COLUMNS + CSV_HEADER)
    assert chunks[5]["output"].startswith("Based on the knowledge base:") and chunks[5]["trace_id"] == tid
    assert chunks[-1] == {"type": "end"}


def test_extractive_agent_without_matches_or_kbs(client: httpx.Client, unique: str) -> None:
    agent = f"ex_empty_{unique}"
    create_agent(client, agent)
    r = client.post(f"{P}/agents/{agent}/completions", json=ask("anything?"))
    assert r.status_code == 200, r.text
    assert "retrieval-only" in r.json()["message"]["content"]


# --- (2) an OpenAI-compatible LLM using kb_query_tool -------------------------------------------------


def test_llm_agent_streams_kb_tool_use(client: httpx.Client, unique: str, kb: str, stub: OpenAIStub) -> None:
    agent = f"llm_{unique}"
    create_agent(
        client, agent, model=stub_llm(stub), data={"knowledge_bases": [kb]}, prompt_template="Answer briefly."
    )
    sql = f"SELECT * FROM mindsdb.{kb} WHERE content = 'penguins in winter' LIMIT 2"
    thought = "I will search the knowledge base."
    stub.script(tool_call("kb_query_tool", sql, thought=thought), text("They huddle together."))
    body = {
        "messages": [
            {"question": "Who are you?", "answer": "An assistant."},
            {"question": "Is it cold?", "answer": None},
            {"question": "How do penguins survive winter?", "answer": ""},
        ]
    }
    chunks = stream(client, agent, body)
    assert kinds(chunks) == ["start", "actions", "steps", "output", "end"]
    tid = chunks[0]["trace_id"]
    assert chunks[0] == {"type": "start", "prompt": "How do penguins survive winter?", "trace_id": tid}
    action = {"tool": "kb_query_tool", "tool_input": sql, "log": thought}
    assert chunks[1] == {"actions": [action], "messages": [{"content": thought}], "trace_id": tid}
    observation = chunks[2]["steps"][0]["observation"]
    assert chunks[2] == {
        "steps": [{"action": action, "observation": observation}],
        "messages": [{"content": observation}],
        "trace_id": tid,
    }
    assert observation.startswith(KB_COLUMNS + CSV_HEADER) and "penguins huddle" in observation
    output = chunks[3]
    assert list(output) == ["output", "messages", "trace_id", "sources"]
    assert output["output"] == "They huddle together." and output["messages"] == [
        {"content": "They huddle together."}
    ]
    assert output["trace_id"] == tid
    assert output["sources"] and all(
        s["kind"] == "kb" and s["name"] == f"mindsdb.{kb}" for s in output["sources"]
    )
    assert chunks[4] == {"type": "end"}

    first, second = stub.requests
    assert first.headers["authorization"] == "Bearer sk-test-key"
    roles = [(m["role"], m.get("content")) for m in first.messages]
    system = str(roles[0][1])
    assert roles[0][0] == "system" and "Answer briefly." in system and f"mindsdb.{kb}" in system
    assert roles[1:] == [
        ("user", "Who are you?"),
        ("assistant", "An assistant."),
        ("user", "Is it cold?"),
        ("user", "How do penguins survive winter?"),
    ]
    assert {t["function"]["name"] for t in first.body["tools"]} == {
        "kb_list_tool",
        "kb_info_tool",
        "kb_query_tool",
    }
    tool_message = second.messages[-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == observation


def test_llm_agent_plain_with_role_messages(
    client: httpx.Client, unique: str, kb: str, stub: OpenAIStub
) -> None:
    agent = f"llm_roles_{unique}"
    create_agent(client, agent, model=stub_llm(stub), data={"knowledge_bases": [f"mindsdb.{kb}"]})
    sql = f"SELECT * FROM mindsdb.{kb} WHERE content = 'octopus hearts' LIMIT 1"
    stub.script(tool_call("kb_query_tool", sql), text("Three hearts."))
    body = {
        "messages": [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi! Ask me about animals."},
            {"role": "user", "content": "How many hearts has an octopus?"},
        ]
    }
    r = client.post(f"{P}/agents/{agent}/completions", json=body)
    assert r.status_code == 200, r.text
    message = r.json()["message"]
    assert message["content"] == "Three hearts." and message["role"] == "assistant"
    assert [c["page_content"] for c in message["context"]] == [ANIMAL_ROWS[2]["content"]]
    assert message["sources"][0]["name"] == f"mindsdb.{kb}"
    assert [(m["role"], m["content"]) for m in stub.requests[0].messages[1:]] == [
        ("user", "Hello"),
        ("assistant", "Hi! Ask me about animals."),
        ("user", "How many hearts has an octopus?"),
    ]


# --- (3) tables: sql_db_query on MariaDB --------------------------------------------------------------


@pytest.fixture()
def maria_source(client: httpx.Client, unique: str, mariadb: dict[str, Any]) -> Iterator[tuple[str, str]]:
    table, source = f"agent_people_{unique}", f"maria_agent_{unique}"
    people = [(1, "Alice", "Paris"), (2, "Bob", "Oslo"), (3, "Chen", "Lima")]
    columns = "id INT PRIMARY KEY, name VARCHAR(32), city VARCHAR(32)"
    with externals.table("mariadb", mariadb, table, columns, people):
        database = {"name": source, "engine": "mariadb", "parameters": mariadb}
        r = client.post("/api/databases", json={"database": database})
        assert r.status_code == 201, r.text
        yield source, table
        client.delete(f"/api/databases/{source}")


def test_table_question_through_sql_db_query(
    client: httpx.Client, unique: str, stub: OpenAIStub, maria_source: tuple[str, str]
) -> None:
    source, table = maria_source
    agent = f"llm_table_{unique}"
    create_agent(client, agent, model=stub_llm(stub), data={"tables": [f"{source}.{table}"]})
    sql = f"SELECT name FROM {source}.{table} WHERE city = 'Oslo'"
    stub.script(tool_call("sql_db_query", sql), text("Bob lives in Oslo."))
    chunks = stream(client, agent, ask("Who lives in Oslo?"))
    assert kinds(chunks) == ["start", "actions", "steps", "output", "end"]
    assert chunks[1]["actions"][0]["tool_input"] == sql
    observation = chunks[2]["steps"][0]["observation"]
    assert observation.startswith("Output columns: 'name'\n" + CSV_HEADER) and "Bob" in observation
    assert "Alice" not in observation
    assert chunks[3]["output"] == "Bob lives in Oslo."
    assert {"kind": "table", "name": f"{source}.{table}"}.items() <= chunks[3]["sources"][0].items()
    tools = {t["function"]["name"] for t in stub.requests[0].body["tools"]}
    assert tools == {"sql_db_list_tables", "sql_db_schema", "sql_db_query"}
    assert stub.requests[1].messages[-1]["content"] == observation


# --- (4) provider errors and timeouts -----------------------------------------------------------------


def test_provider_401_is_502_plain_and_an_error_chunk_streamed(
    client: httpx.Client, unique: str, stub: OpenAIStub
) -> None:
    agent = f"llm_401_{unique}"
    create_agent(client, agent, model=stub_llm(stub, key="sk-wrong"))
    stub.script(error(401, "Incorrect API key provided: sk-wrong"))
    body = assert_problem(client.post(f"{P}/agents/{agent}/completions", json=ask("hi")), 502)
    assert "401" in body["detail"] and "Incorrect API key provided" in body["detail"]
    assert "openai" in body["detail"]

    stub.script(error(401, "Incorrect API key provided: sk-wrong"))
    chunks = stream(client, agent, ask("hi"))
    assert kinds(chunks) == ["start", "error", "end"]
    tid = chunks[0]["trace_id"]
    err = chunks[1]
    assert list(err) == ["type", "content", "error_type", "trace_id"]
    assert err["error_type"] == "authentication" and err["trace_id"] == tid
    assert "Incorrect API key provided" in err["content"]
    assert chunks[2] == {"type": "end"}


def test_rate_limit_and_missing_model_error_types(
    client: httpx.Client, unique: str, stub: OpenAIStub
) -> None:
    agent = f"llm_err_{unique}"
    create_agent(client, agent, model={**stub_llm(stub), "max_retries": 0})
    for status, error_type in ((429, "rate_limit"), (404, "not_found"), (500, "general")):
        stub.script(error(status, f"stub says {status}"))
        chunks = stream(client, agent, ask("hi"))
        assert kinds(chunks) == ["start", "error", "end"], chunks
        assert chunks[1]["error_type"] == error_type and f"stub says {status}" in chunks[1]["content"]


def test_missing_key_and_unreachable_provider(
    client: httpx.Client, unique: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    create_agent(
        client, f"claude_{unique}", model={"provider": "anthropic", "model_name": "claude-sonnet-4-5"}
    )
    chunks = stream(client, f"claude_{unique}", ask("hi"))
    assert kinds(chunks) == ["start", "error", "end"]
    assert chunks[1]["error_type"] == "authentication" and "ANTHROPIC_API_KEY" in chunks[1]["content"]

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    model = {"provider": "openai", "model_name": "gpt-stub", "base_url": closed, "max_retries": 0}
    create_agent(client, f"gone_{unique}", model=model)
    chunks = stream(client, f"gone_{unique}", ask("hi"))
    assert kinds(chunks) == ["start", "error", "end"]
    assert chunks[1]["error_type"] == "connection" and "'openai'" in chunks[1]["content"]
    problem = assert_problem(client.post(f"{P}/agents/gone_{unique}/completions", json=ask("hi")), 502)
    assert problem["title"] == "Model provider unreachable"


def test_run_past_the_agent_timeout(client: httpx.Client, unique: str, stub: OpenAIStub) -> None:
    agent = f"llm_slow_{unique}"
    create_agent(client, agent, model=stub_llm(stub), params={"timeout": 1})
    stub.script(text("too late", delay=3))
    started = time.monotonic()
    chunks = stream(client, agent, ask("hi"))
    assert time.monotonic() - started < 2.8
    assert kinds(chunks) == ["start", "error", "end"]
    assert chunks[1]["error_type"] == "timeout" and "1 seconds" in chunks[1]["content"]

    stub.script(text("too late", delay=3))
    started = time.monotonic()
    body = assert_problem(client.post(f"{P}/agents/{agent}/completions", json=ask("hi")), 502)
    assert body["title"] == "Agent timed out" and time.monotonic() - started < 2.8


def test_steps_are_bounded(client: httpx.Client, unique: str, kb: str, stub: OpenAIStub) -> None:
    agent = f"llm_loop_{unique}"
    create_agent(
        client, agent, model=stub_llm(stub), data={"knowledge_bases": [kb]}, params={"max_iterations": 2}
    )
    stub.script(*[tool_call("kb_list_tool", "") for _ in range(6)])
    chunks = stream(client, agent, ask("loop forever"))
    assert kinds(chunks)[-2:] == ["output", "end"]
    assert chunks[-2]["output"] == "I could not finish within 2 steps."
    assert kinds(chunks).count("steps") == 2 and kinds(chunks).count("actions") == 2


# --- (5) chunks are flushed as they happen ------------------------------------------------------------


def test_chunks_arrive_as_they_are_produced(
    client: httpx.Client, unique: str, kb: str, stub: OpenAIStub
) -> None:
    agent = f"llm_flush_{unique}"
    create_agent(client, agent, model=stub_llm(stub), data={"knowledge_bases": [kb]})
    stub.script(tool_call("kb_list_tool", ""), text("done", delay=1.5))
    arrivals: list[tuple[float, dict[str, Any]]] = []
    started = time.monotonic()
    with client.stream("POST", f"{P}/agents/{agent}/completions/stream", json=ask("list them")) as r:
        for line in r.iter_lines():
            if line:
                arrivals.append((time.monotonic() - started, json.loads(line.removeprefix("data: "))))
    assert kinds([c for _, c in arrivals]) == ["start", "actions", "steps", "output", "end"]
    step_at, output_at = arrivals[2][0], arrivals[3][0]
    assert output_at - step_at > 1.0, arrivals


# --- (6) a client that goes away cancels the run ------------------------------------------------------


def test_client_disconnect_cancels_the_run(
    client: httpx.Client, unique: str, kb: str, stub: OpenAIStub
) -> None:
    agent = f"llm_gone_{unique}"
    create_agent(client, agent, model=stub_llm(stub), data={"knowledge_bases": [kb]})
    stub.script(tool_call("kb_list_tool", "", delay=2), text("never sent"))
    with client.stream("POST", f"{P}/agents/{agent}/completions/stream", json=ask("slow")) as r:
        lines = r.iter_lines()  # kept: dropping the iterator would close the connection at once
        first = json.loads(next(lines).removeprefix("data: "))
        deadline = time.monotonic() + 10
        while not stub.requests and time.monotonic() < deadline:  # the model request is in flight
            time.sleep(0.05)
        assert len(stub.requests) == 1
    tid = first["trace_id"]
    deadline = time.monotonic() + 10
    trace: dict[str, Any] = {}
    while time.monotonic() < deadline:
        got = client.get(f"{P}/agents/{agent}/traces/{tid}")
        if got.status_code == 200:
            trace = got.json()
            break
        time.sleep(0.1)
    assert trace.get("status") == "cancelled", trace
    assert trace["steps"] == [] and trace["answer"] is None
    time.sleep(2.5)  # the stub's first reply is due by now: a live run would ask again
    assert len(stub.requests) == 1


# --- (7) traces ---------------------------------------------------------------------------------------


def test_trace_of_a_run(client: httpx.Client, unique: str, kb: str, stub: OpenAIStub) -> None:
    agent = f"llm_trace_{unique}"
    create_agent(client, agent, model=stub_llm(stub, key="sk-secret-trace"), data={"knowledge_bases": [kb]})
    sql = f"SELECT * FROM mindsdb.{kb} WHERE content = 'cheetah' LIMIT 1"
    stub.script(tool_call("kb_query_tool", sql), text("The cheetah."))
    reply = client.post(f"{P}/agents/{agent}/completions", json=ask("Fastest animal?")).json()
    tid = reply["message"]["trace_id"]

    r = client.get(f"{P}/agents/{agent}/traces/{tid}")
    assert r.status_code == 200, r.text
    assert "sk-secret-trace" not in r.text
    trace = r.json()
    assert trace["trace_id"] == tid and trace["status"] == "completed" and trace["agent_name"] == agent
    assert (
        trace["question"] == "Fastest animal?"
        and trace["answer"] == "The cheetah."
        and trace["error"] is None
    )
    assert trace["model"] == {"provider": "openai", "model_name": "gpt-stub"}
    (step,) = trace["steps"]
    assert step["tool"] == "kb_query_tool" and step["tool_input"] == sql
    assert step["observation"].startswith(KB_COLUMNS) and step["log"].startswith("Calling kb_query_tool")
    assert isinstance(step["duration_ms"], float) and step["duration_ms"] >= 0
    assert step["citations"][0]["name"] == f"mindsdb.{kb}"
    assert trace["usage"]["requests"] == 2 and trace["usage"]["tool_calls"] == 1
    assert trace["usage"]["input_tokens"] == 22 and trace["usage"]["output_tokens"] == 14
    assert trace["duration_ms"] >= 0 and trace["started_at"] <= trace["finished_at"]

    assert_problem(client.get(f"{P}/agents/{agent}/traces/{uuid.uuid4().hex}"), 404)
    assert_problem(client.get(f"{P}/agents/nope_{unique}/traces/{tid}"), 404)


# --- (8) 404 and 400 ----------------------------------------------------------------------------------


def test_unknown_agent_or_project_and_bad_messages(client: httpx.Client, unique: str) -> None:
    agent = f"ok_{unique}"
    create_agent(client, agent)
    for route in ("completions", "completions/stream"):
        body = assert_problem(client.post(f"{P}/agents/nope_{unique}/{route}", json=ask("hi")), 404)
        assert body["title"] == "Agent not found"
        missing_project = assert_problem(
            client.post(f"/api/projects/nope_{unique}/agents/{agent}/{route}", json=ask("hi")), 404
        )
        assert missing_project["title"] == "Project not found"
        bad: dict[str, Any]
        for bad in ({}, {"messages": []}, {"messages": None}, {"question": "hi"}):
            problem = assert_problem(client.post(f"{P}/agents/{agent}/{route}", json=bad), 400)
            assert problem["detail"] == 'Must provide "messages" parameter in POST body'
        assert_problem(
            client.post(
                f"{P}/agents/{agent}/{route}",
                content=b"not json",
                headers={"content-type": "application/json"},
            ),
            400,
        )
        no_question = {"messages": [{"question": "", "answer": "an answer"}]}
        assert_problem(client.post(f"{P}/agents/{agent}/{route}", json=no_question), 400)
        assert_problem(client.post(f"{P}/agents/{agent}/{route}", json={"messages": ["text"]}), 400)


# --- the stub also speaks streamed Chat Completions (for models that stream) -----------------------


async def test_stub_streams_tool_calls_like_openai(stub: OpenAIStub) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models import create_async_httpx2_client
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = create_async_httpx2_client()
    try:
        provider = OpenAIProvider(base_url=stub.base_url, api_key="sk-stream", http_client=client)
        agent = Agent(OpenAIChatModel("gpt-stub", provider=provider))
        seen: list[str] = []

        @agent.tool_plain
        def lookup(tool_input: str) -> str:
            seen.append(tool_input)
            return "42"

        stub.script(tool_call("lookup", "the answer"), text("It is 42."))
        async with agent.run_stream("What is the answer?") as result:
            assert await result.get_output() == "It is 42."
    finally:
        await client.aclose()
    assert seen == ["the answer"]
    assert [r.body["stream"] for r in stub.requests] == [True, True]
    assert stub.requests[1].messages[-1] == {"role": "tool", "tool_call_id": "call_0_lookup", "content": "42"}
