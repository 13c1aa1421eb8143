"""`ChatClient` (agents/providers/openai_client.py) sends what the OpenAI SDK's own client sends — the same
body, headers and parsed answer, plain and streamed, with tools and tool results — without running the
SDK's parameter transform over the messages and tools."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from openai import AsyncOpenAI, omit
from openai._utils import _transform

from agentkb.agents.providers.openai_client import ChatClient
from tests.openai_stub import OpenAIStub, text, tool_call

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "kb_query_tool",
            "description": "Search a knowledge base.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "SQL"}},
                "required": ["query"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }
]

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You answer from the knowledge base."},
    {"role": "user", "content": [{"type": "text", "text": "What do pandas eat?"}]},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "kb_query_tool", "arguments": '{"query": "SELECT 1"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "Pandas eat bamboo. ünïcödé"},
]

STRIP = ("x-stainless-retry-count", "x-stainless-read-timeout", "content-length")


@pytest.fixture(scope="module")
def chat_stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


async def _ask(client_class: type[AsyncOpenAI], stub: OpenAIStub, stream: bool, **extra: Any) -> Any:
    async with httpx2.AsyncClient() as http:
        client = client_class(base_url=stub.url, api_key="sk-test", http_client=http, organization="org-1")
        args: dict[str, Any] = {
            "model": "stub",
            "messages": (m for m in MESSAGES),  # an iterable, as the SDK's types allow
            "tools": TOOLS,
            "temperature": 0.1,
            **extra,
        }
        if stream:
            chunks = await client.chat.completions.create(stream=True, **args)
            return [c.model_dump() async for c in chunks]
        answer = await client.chat.completions.create(**args)
        return answer.model_dump()


def _sent(stub: OpenAIStub) -> tuple[dict[str, str], Any]:
    (recorded,) = stub.requests
    headers = {k: v for k, v in recorded.headers.items() if k not in STRIP}
    return headers, recorded.body


@pytest.mark.parametrize("stream", [False, True])
def test_chat_client_sends_what_the_sdk_sends(chat_stub: OpenAIStub, stream: bool) -> None:
    sent = []
    for client_class in (AsyncOpenAI, ChatClient):
        chat_stub.script(tool_call("kb_query_tool", '{"query": "SELECT 2"}', thought="searching"))
        answer = asyncio.run(_ask(client_class, chat_stub, stream))
        sent.append((*_sent(chat_stub), _without_ids(answer)))
    sdk, ours = sent
    assert ours[1] == sdk[1]
    assert ours[1]["messages"] == MESSAGES and ours[1]["tools"] == TOOLS
    assert ours[0] == sdk[0] and ours[0]["authorization"] == "Bearer sk-test"
    assert ours[0]["openai-organization"] == "org-1"
    assert ours[2] == sdk[2]


def test_extra_body_still_wins_and_omitted_tools_stay_out(chat_stub: OpenAIStub) -> None:
    chat_stub.script(text("hi"))
    asyncio.run(_ask(ChatClient, chat_stub, False, tools=omit, extra_body={"top_k": 3}))
    _, body = _sent(chat_stub)
    assert "tools" not in body and body["top_k"] == 3 and body["messages"] == MESSAGES


def test_a_parameter_create_does_not_take_is_still_refused(chat_stub: OpenAIStub) -> None:
    with pytest.raises(TypeError, match="no_such_parameter"):
        asyncio.run(_ask(ChatClient, chat_stub, False, no_such_parameter=1))


def test_the_sdk_transform_does_not_walk_messages_or_tools(
    chat_stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the client exists for: the SDK's transform walks no message, tool or other body parameter."""
    seen: list[Any] = []
    real = _transform._async_transform_recursive

    async def spy(data: object, **kwargs: Any) -> object:
        seen.append(data)
        return await real(data, **kwargs)

    monkeypatch.setattr(_transform, "_async_transform_recursive", spy)
    chat_stub.script(text("hi"))
    asyncio.run(_ask(ChatClient, chat_stub, False))
    assert seen, "the SDK still transforms the other parameters"
    walked = [d for d in seen if isinstance(d, dict) and ("role" in d or d.get("type") == "function")]
    assert walked == []
    assert all(d == [] or not isinstance(d, list | float) for d in seen)  # no temperature, no messages


def _without_ids(answer: Any) -> Any:
    """The stub's completion ids and timestamps differ per request."""
    if isinstance(answer, list):
        return [_without_ids(a) for a in answer]
    if isinstance(answer, dict):
        return {k: _without_ids(v) for k, v in answer.items() if k not in ("id", "created")}
    return answer
