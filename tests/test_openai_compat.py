"""The OpenAI-compatible endpoint, driven by the official `openai` Python client against the served app:
agents listed as models, chat completions plain and streamed (the extractive model, and an LLM agent on the
scripted OpenAI stub with a tool step), usage, the `agentkb` extension field, OpenAI-shaped errors, and
the same credentials as the rest of the API when auth is on."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from tests.conftest import ServedApp
from tests.helpers import ANIMAL_ROWS, create_agent, kb_with_rows, stub_llm
from tests.openai_stub import USAGE, OpenAIStub, error, text, tool_call
from tests.test_auth import _database, _drop, auth_settings, create_key

P = "/api/projects/mindsdb"


@pytest.fixture(scope="module")
def kb(base_url: str) -> str:
    return kb_with_rows(base_url, "oai_kb", ANIMAL_ROWS[:2])


@pytest.fixture()
def oai(base_url: str) -> OpenAI:
    # no retries: a failed run must be seen once, not repeated by the client
    return OpenAI(base_url=f"{base_url}/v1", api_key="unused-when-auth-is-off", max_retries=0, timeout=120)


def test_models_are_the_agents(client: httpx.Client, oai: OpenAI, unique: str) -> None:
    project = f"oai_p_{unique}"
    assert client.post("/api/projects", json={"name": project}).status_code == 201
    create_agent(client, f"here_{unique}")
    create_agent(client, f"there_{unique}", project=project)
    models = {m.id: m for m in oai.models.list()}
    assert models[f"here_{unique}"].owned_by == "mindsdb"  # the default project's: the bare name
    assert models[f"{project}.there_{unique}"].owned_by == project
    assert models[f"here_{unique}"].object == "model" and models[f"here_{unique}"].created > 0
    assert f"mindsdb.here_{unique}" not in models and f"there_{unique}" not in models


def test_extractive_agent_plain_and_streamed(client: httpx.Client, oai: OpenAI, unique: str, kb: str) -> None:
    agent = f"oai_ex_{unique}"
    create_agent(client, agent, data={"knowledge_bases": [f"mindsdb.{kb}"]})
    question = "Which animal is the fastest on land?"
    messages: Any = [{"role": "user", "content": question}]

    plain = oai.chat.completions.create(model=agent, messages=messages)
    assert plain.object == "chat.completion" and plain.model == agent
    (choice,) = plain.choices
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    assert choice.message.content is not None and choice.message.content.startswith(
        "Based on the knowledge base:"
    )
    assert "cheetah" in choice.message.content
    extension = (plain.model_extra or {})["agentkb"]
    assert plain.id == f"chatcmpl-{extension['trace_id']}"
    assert [s["tool"] for s in extension["steps"]] == ["kb_list_tool", "kb_query_tool"]
    assert "cheetah" in extension["steps"][1]["observation"]
    assert extension["sources"][0]["name"] == f"mindsdb.{kb}"
    assert any("cheetah" in c["page_content"] for c in extension["context"])
    trace = client.get(f"{P}/agents/{agent}/traces/{extension['trace_id']}")
    assert (
        trace.status_code == 200 and trace.json()["answer"] == choice.message.content
    )  # the agent's own run

    # the same run by the project-qualified id, streamed
    chunks = list(
        oai.chat.completions.create(
            model=f"mindsdb.{agent}", messages=messages, stream=True, stream_options={"include_usage": True}
        )
    )
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == choice.message.content
    steps = [
        (c.model_extra or {})["agentkb"]["step"]
        for c in chunks
        if "step" in (c.model_extra or {}).get("agentkb", {})
    ]
    assert [s["tool"] for s in steps] == ["kb_list_tool", "kb_query_tool"]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens > 0 and chunks[-1].usage.total_tokens == (
        chunks[-1].usage.prompt_tokens + chunks[-1].usage.completion_tokens
    )


def test_llm_agent_history_tool_step_and_usage(
    client: httpx.Client, oai: OpenAI, unique: str, kb: str, stub: OpenAIStub
) -> None:
    agent = f"oai_llm_{unique}"
    create_agent(
        client,
        agent,
        model=stub_llm(stub),
        data={"knowledge_bases": [f"mindsdb.{kb}"]},
        prompt_template="Be brief.",
    )
    sql = f"SELECT * FROM mindsdb.{kb} WHERE content = 'penguins in winter' LIMIT 1"
    messages: Any = [
        {"role": "system", "content": "Answer in one sentence."},
        {"role": "user", "content": "Who are you?"},
        {"role": "assistant", "content": "An assistant."},
        {"role": "developer", "content": "Cite the knowledge base."},
        {"role": "user", "content": [{"type": "text", "text": "How do penguins survive winter?"}]},
    ]
    stub.script(tool_call("kb_query_tool", sql, thought="Searching."), text("They huddle together."))
    plain = oai.chat.completions.create(model=agent, messages=messages, temperature=0.2)
    assert plain.choices[0].message.content == "They huddle together."
    # two LLM requests, each reporting the stub's usage
    assert plain.usage is not None
    assert (plain.usage.prompt_tokens, plain.usage.completion_tokens, plain.usage.total_tokens) == (
        2 * USAGE["prompt_tokens"],
        2 * USAGE["completion_tokens"],
        2 * USAGE["total_tokens"],
    )
    (step,) = (plain.model_extra or {})["agentkb"]["steps"]
    assert (
        step["tool"] == "kb_query_tool"
        and step["tool_input"] == sql
        and "penguins huddle" in step["observation"]
    )

    # the conversation reached the agent's LLM: system messages joined to the agent's prompt, then history
    first = stub.requests[0]
    roles = [(m["role"], m.get("content")) for m in first.messages]
    system = str(roles[0][1])
    assert roles[0][0] == "system"
    assert (
        "Be brief." in system and "Answer in one sentence." in system and "Cite the knowledge base." in system
    )
    assert roles[1:] == [
        ("user", "Who are you?"),
        ("assistant", "An assistant."),
        ("user", "How do penguins survive winter?"),
    ]

    stub.script(tool_call("kb_query_tool", sql), text("They huddle."))
    chunks = list(
        oai.chat.completions.create(
            model=agent, messages=messages, stream=True, stream_options={"include_usage": True}
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "They huddle."
    steps = [(c.model_extra or {}).get("agentkb", {}).get("step") for c in chunks]
    assert [s["tool"] for s in steps if s] == ["kb_query_tool"]
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 2 * USAGE["total_tokens"]


def test_streamed_text_arrives_as_the_model_writes_it(
    client: httpx.Client, oai: OpenAI, unique: str, kb: str, stub: OpenAIStub
) -> None:
    """`stream: true`: one content chunk per model delta, sent while the model is still writing (the stub
    stops after two words of its answer until the test has read them). A thought before a tool call is
    streamed too (nothing could tell yet that it was not the answer); the answer follows after a blank line.
    The plain completion's content is the answer alone."""
    agent = f"oai_tokens_{unique}"
    create_agent(client, agent, model=stub_llm(stub), data={"knowledge_bases": [f"mindsdb.{kb}"]})
    sql = f"SELECT * FROM mindsdb.{kb} WHERE content = 'penguins' LIMIT 1"
    answer = "Penguins huddle together for warmth in winter."
    stub.resume.clear()
    stub.script(tool_call("kb_query_tool", sql, thought="Let me look."), text(answer, halt_after=2))
    watchdog = threading.Timer(60, stub.resume.set)  # a server that does not stream would wait forever
    watchdog.start()
    pieces: list[str] = []
    read_before_resume: list[str] = []
    try:
        stream = oai.chat.completions.create(
            model=agent, messages=[{"role": "user", "content": "Penguins?"}], stream=True
        )
        for chunk in stream:
            content = chunk.choices[0].delta.content if chunk.choices else None
            if content:
                pieces.append(content)
                if not stub.resume.is_set() and "".join(pieces).endswith("Penguins huddle "):
                    read_before_resume = list(pieces)
                    stub.resume.set()  # the model writes the rest
    finally:
        watchdog.cancel()
        stub.resume.set()
    assert read_before_resume, pieces  # two words of the answer came before the model had written the rest
    words = ["Penguins ", "huddle ", "together ", "for ", "warmth ", "in ", "winter."]
    assert pieces == ["Let ", "me ", "look.", "\n\n" + words[0], *words[1:]]
    stub.script(tool_call("kb_query_tool", sql, thought="Let me look."), text(answer))
    plain = oai.chat.completions.create(model=agent, messages=[{"role": "user", "content": "Penguins?"}])
    assert plain.choices[0].message.content == answer


def test_errors_are_openai_shaped(
    client: httpx.Client, oai: OpenAI, base_url: str, unique: str, stub: OpenAIStub
) -> None:
    agent = f"oai_err_{unique}"
    create_agent(client, agent, model={**stub_llm(stub), "max_retries": 0})
    hello: Any = [{"role": "user", "content": "hi"}]

    with pytest.raises(openai.NotFoundError) as missing:
        oai.chat.completions.create(model=f"no_agent_{unique}", messages=hello)
    assert missing.value.code == "model_not_found" and missing.value.param == "model"
    assert missing.value.type == "invalid_request_error" and "does not exist" in missing.value.message
    with pytest.raises(openai.NotFoundError):
        oai.chat.completions.create(model=f"no_project_{unique}.{agent}", messages=hello, stream=True)

    with pytest.raises(openai.BadRequestError) as no_question:
        oai.chat.completions.create(model=agent, messages=[{"role": "system", "content": "be nice"}])
    assert "no question" in no_question.value.message
    with pytest.raises(openai.BadRequestError) as tool_role:
        oai.chat.completions.create(
            model=agent, messages=[{"role": "tool", "content": "x", "tool_call_id": "1"}]
        )
    assert "role" in tool_role.value.message and tool_role.value.param == "messages"

    raw = httpx.post(f"{base_url}/v1/chat/completions", content=b"{not json", timeout=30)
    assert raw.status_code == 400 and raw.headers["content-type"] == "application/json"
    assert set(raw.json()["error"]) == {"message", "type", "param", "code"}
    empty = httpx.post(f"{base_url}/v1/chat/completions", json={"model": agent, "messages": []}, timeout=30)
    assert empty.status_code == 400 and "messages" in empty.json()["error"]["message"]

    # the agent's LLM fails: a 502 (not retried by the client), or an error event in the stream
    stub.script(error(401, "the model is on fire"))
    with pytest.raises(openai.InternalServerError) as failed:
        oai.chat.completions.create(model=agent, messages=hello)
    assert failed.value.status_code == 502 and failed.value.response.headers["x-should-retry"] == "false"
    assert failed.value.type == "server_error" and failed.value.code == "authentication"
    assert "the model is on fire" in failed.value.message
    stub.script(error(401, "the model is on fire"))
    with pytest.raises(openai.APIError) as broken:
        list(oai.chat.completions.create(model=agent, messages=hello, stream=True))
    assert "the model is on fire" in broken.value.message

    # the raw stream: OpenAI's framing, an error event, then [DONE]
    stub.script(error(401, "the model is on fire"))
    body = {"model": agent, "messages": hello, "stream": True}
    streamed = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60)
    assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
    events = [block.removeprefix("data: ") for block in streamed.text.strip().split("\n\n")]
    assert events[-1] == "[DONE]" and "error" in json.loads(events[-2])


@pytest.fixture(scope="module")
def secured(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServedApp, str]]:
    url = _database(pg_url, f"oai_auth_{uuid.uuid4().hex[:8]}")
    data_dir: Path = tmp_path_factory.mktemp("oai-auth")
    try:
        key = create_key("openwebui", url, data_dir)
        with ServedApp(auth_settings(url, data_dir)) as app:
            yield app, key
    finally:
        _drop(pg_url, url)


def test_v1_takes_the_api_credentials(secured: tuple[ServedApp, str]) -> None:
    app, key = secured
    with httpx.Client(base_url=app.url, timeout=60) as c:
        assert (
            c.post(
                "/api/projects/mindsdb/agents", json={"agent": {"name": "helper"}}, headers={"X-Api-Key": key}
            ).status_code
            == 201
        )
    for bad in ("", "akb_" + "x" * 43):
        anonymous = OpenAI(base_url=f"{app.url}/v1", api_key=bad or "none", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as refused:
            anonymous.models.list()
        assert refused.value.status_code == 401 and refused.value.code == "invalid_api_key"
        assert refused.value.response.headers["www-authenticate"].startswith("Bearer")
    missing = httpx.post(
        f"{app.url}/v1/chat/completions", json={"model": "helper", "messages": []}, timeout=30
    )
    assert missing.status_code == 401 and "Authorization is required" in missing.json()["error"]["message"]

    keyed = OpenAI(base_url=f"{app.url}/v1", api_key=key, max_retries=0, timeout=120)
    assert [m.id for m in keyed.models.list()] == ["helper"]
    answer = keyed.chat.completions.create(
        model="helper", messages=[{"role": "user", "content": "Anything?"}]
    )
    assert answer.choices[0].message.content
    token = httpx.post(
        f"{app.url}/api/login", json={"username": "admin", "password": "correct horse battery staple"}
    )
    by_login = OpenAI(base_url=f"{app.url}/v1", api_key=token.json()["token"], max_retries=0)
    assert [m.id for m in by_login.models.list()] == ["helper"]
