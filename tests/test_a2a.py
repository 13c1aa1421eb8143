"""MindsDB's A2A endpoint (`/a2a/`), driven by the official `a2a-sdk` client (its A2A 0.3 JSON-RPC transport,
chosen from the card) and by raw JSON-RPC in MindsDB's own shapes (`tasks/send`, `tasks/sendSubscribe`, its
README's request), over the session server with an extractive agent over a knowledge base."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

P = "/api/projects/mindsdb"
ROWS = [
    {"id": 1, "content": "The cheetah is the fastest land animal, reaching 110 km/h."},
    {"id": 2, "content": "Emperor penguins huddle together to survive the Antarctic winter."},
]


@pytest.fixture(scope="module")
def agent(base_url: str) -> str:
    tag = uuid.uuid4().hex[:8]
    kb, name = f"a2a_kb_{tag}", f"a2a_agent_{tag}"
    with httpx.Client(base_url=base_url, timeout=120) as c:
        assert c.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb}}).status_code == 201
        assert c.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": ROWS}}).status_code == 200
        body = {"agent": {"name": name, "data": {"knowledge_bases": [f"mindsdb.{kb}"]}}}
        assert c.post(f"{P}/agents", json=body).status_code == 201
    return name


def _message(text: str, agent: str, **extra: Any) -> SendMessageRequest:
    message = Message(
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        message_id=uuid.uuid4().hex,
        metadata={"agentName": agent},
        **extra,
    )
    return SendMessageRequest(message=message)


async def test_round_trip_with_the_a2a_sdk_client(base_url: str, agent: str) -> None:
    async with httpx.AsyncClient(timeout=120) as http:
        card = await A2ACardResolver(http, f"{base_url}/a2a").get_agent_card()
        assert card.name == "agentkb" and card.capabilities.streaming
        assert card.supported_interfaces[0].url == f"{base_url}/a2a/"

        # message/send: one task, completed, the answer as its artifact and its status message
        plain = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        [response] = [r async for r in plain.send_message(_message("Which animal is the fastest?", agent))]
        task = response.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        answer = task.artifacts[0].parts[0].text
        assert "cheetah" in answer and task.status.message.parts[0].text == answer
        assert [m.role for m in task.history] == [Role.ROLE_USER, Role.ROLE_AGENT]
        fetched = await plain.get_task(GetTaskRequest(id=task.id))
        assert (
            fetched.status.state == TaskState.TASK_STATE_COMPLETED and fetched.context_id == task.context_id
        )

        # message/stream: the task, working, the answer's artifact, the final status
        streaming = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
        events = [r async for r in streaming.send_message(_message("Where do penguins huddle?", agent))]
        kinds = [e.WhichOneof("payload") for e in events]
        assert kinds == ["task", "status_update", "artifact_update", "status_update"], kinds
        assert events[1].status_update.status.state == TaskState.TASK_STATE_WORKING
        assert "penguins" in events[2].artifact_update.artifact.parts[0].text
        final = events[3].status_update
        assert final.status.state == TaskState.TASK_STATE_COMPLETED
        # the same context continues the conversation: the earlier turn is the run's history
        follow = _message("And the cheetah?", agent, context_id=final.context_id)
        [again] = [r async for r in plain.send_message(follow)]
        assert again.task.context_id == final.context_id and len(again.task.history) == 4


def rpc(client: httpx.Client, method: str, params: Any, rpc_id: Any = "r1") -> dict[str, Any]:
    r = client.post("/a2a/", json={"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})
    assert r.status_code == 200, r.text
    assert r.json()["id"] == rpc_id
    return r.json()  # type: ignore[no-any-return]


def test_mindsdbs_own_shapes(client: httpx.Client, agent: str) -> None:
    """MindsDB's README request (`tasks/sendSubscribe`, parts typed by `type`, `agentName` in the message's
    metadata), `tasks/send`, `tasks/get` and `tasks/cancel`, and its card paths."""
    card = client.get("/a2a/.well-known/agent.json").json()
    assert card == client.get("/a2a/.well-known/agent-card.json").json()
    assert card["url"].endswith("/a2a/") and card["skills"] and card["capabilities"]["streaming"] is True
    assert client.get("/a2a/status").json()["status"] == "ok"

    task_id, session = uuid.uuid4().hex, uuid.uuid4().hex
    params = {
        "id": task_id,
        "sessionId": session,
        "message": {
            "role": "user",
            "parts": [{"type": "text", "text": "Which animal is the fastest?"}],
            "metadata": {"agent_name": agent},
        },
        "acceptedOutputModes": ["text/plain"],
    }
    body = {"jsonrpc": "2.0", "id": 7, "method": "tasks/sendSubscribe", "params": params}
    with client.stream("POST", "/a2a/", json=body, headers={"Accept": "text/event-stream"}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    assert {e["id"] for e in events} == {7}
    results = [e["result"] for e in events]
    assert [x.get("final") for x in results] == [False, None, True]
    assert (
        results[1]["artifact"]["parts"][0]["type"] == "text"
        and "cheetah" in results[1]["artifact"]["parts"][0]["text"]
    )
    assert results[2]["id"] == task_id and results[2]["status"]["state"] == "completed"

    sent = rpc(
        client,
        "tasks/send",
        {**params, "message": {**params["message"], "parts": [{"type": "text", "text": "And penguins?"}]}},
    )
    task = sent["result"]
    assert task["id"] == task_id and task["sessionId"] == session and task["status"]["state"] == "completed"
    assert "penguins" in task["artifacts"][0]["parts"][0]["text"].lower()
    assert [m["role"] for m in task["history"]] == ["user", "agent", "user", "agent"]
    got = rpc(client, "tasks/get", {"id": task_id, "historyLength": 1})["result"]
    assert got["status"]["state"] == "completed" and len(got["history"]) == 1
    assert rpc(client, "tasks/cancel", {"id": task_id})["error"]["code"] == -32002


def test_json_rpc_errors(client: httpx.Client, agent: str) -> None:
    message = {"role": "user", "parts": [{"kind": "text", "text": "hi"}], "messageId": "m1"}
    assert rpc(client, "message/send", {"message": message})["error"]["code"] == -32600  # no agent named
    missing = rpc(
        client, "message/send", {"message": {**message, "metadata": {"agentName": "no_such_agent"}}}
    )
    assert missing["error"]["code"] == -32602 and missing["error"]["data"]["status"] == 404
    other_project = {**message, "metadata": {"agentName": agent, "project_name": "no_such_project"}}
    assert rpc(client, "message/send", {"message": other_project})["error"]["data"]["status"] == 404
    empty = {**message, "parts": [], "metadata": {"agentName": agent}}
    assert rpc(client, "message/send", {"message": empty})["error"]["data"]["status"] == 400
    assert rpc(client, "tasks/get", {"id": "nope"})["error"]["code"] == -32001
    assert rpc(client, "tasks/pushNotification/set", {"id": "x"})["error"]["code"] == -32003
    assert rpc(client, "tasks/nonsense", {})["error"]["code"] == -32601
    bad = client.post("/a2a/", content=b"{not json", headers={"Content-Type": "application/json"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == -32700
    shape = client.post("/a2a", json={"id": 3, "method": "message/send"})  # no "jsonrpc": "2.0"
    assert shape.status_code == 400 and shape.json() == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32600, "message": "Request payload validation error"},
    }
    for odd in (
        {"jsonrpc": "2.0", "id": [1], "method": "tasks/get"},
        {"jsonrpc": "2.0", "method": "x", "params": 5},
    ):
        refused = client.post("/a2a/", json=odd)
        assert refused.status_code == 400 and refused.json()["error"]["code"] == -32600
        assert refused.json()["id"] is None
