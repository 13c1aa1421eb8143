"""The one event-stream lifecycle (`service.platform.streams.relay`) with each protocol's encoder: a source that fails
ends each agent stream with its own error event and its end, a job stream raises the failure on, and a
client going away closes the source (so an agent run is cancelled and its trace stored)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from agentkb.api.openai_compat import ChatChunks
from agentkb.api.sse import AgentChunks, JobRecords
from agentkb.console.agents import ChatEvents
from agentkb.service.platform.streams import Encoder, relay
from agentkb.service.types import End, Event, Start


async def _failing(*events: Event) -> AsyncIterator[Event]:
    for event in events:
        yield event
    raise RuntimeError("boom")


def _chunks(encoder: Encoder[Any], items: AsyncIterator[Any]) -> list[Any]:
    async def run() -> list[str]:
        return [chunk async for chunk in relay(items, asyncio.Event(), encoder)]

    payloads = [c.removeprefix("data: ").strip() for c in asyncio.run(run())]
    return [p if p == "[DONE]" else json.loads(p) for p in payloads]


START = Start(prompt="q", trace_id="t1")


def test_a_failing_run_ends_the_mindsdb_stream_with_its_error_chunk_and_end() -> None:
    assert _chunks(AgentChunks(), _failing(START)) == [
        {"type": "start", "prompt": "q", "trace_id": "t1"},
        {
            "type": "error",
            "content": "Error in completion event generator: boom",
            "error_type": "general",
            "trace_id": "",
        },
        {"type": "end"},
    ]


def test_a_failing_run_ends_the_openai_stream_with_an_error_and_done() -> None:
    chunks = _chunks(ChatChunks(cast(Any, None), "agent", 0, include_usage=True), _failing(START))
    assert chunks[0]["id"] == "chatcmpl-t1"
    assert chunks[1:] == [
        {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}},
        "[DONE]",
    ]


def test_a_failing_run_ends_the_console_chat_with_an_error_and_end() -> None:
    chunks = _chunks(ChatEvents("agent"), _failing(START))
    assert [c["kind"] for c in chunks] == ["start", "error", "end"]
    assert chunks[1]["content"] == "The agent run failed: boom" and chunks[1]["trace_id"] == "t1"


def test_a_finished_run_is_not_given_a_second_end() -> None:
    async def finished() -> AsyncIterator[Event]:
        yield START
        yield End()

    assert _chunks(AgentChunks(), finished())[-1] == {"type": "end"}
    assert len(_chunks(AgentChunks(), finished())) == 2
    assert [c["kind"] for c in _chunks(ChatEvents("agent"), finished())] == ["start", "end"]


def test_a_failing_job_stream_raises_the_failure_on() -> None:
    async def last_words(sent: dict[str, Any] | None) -> dict[str, Any]:
        return {}

    with pytest.raises(RuntimeError, match="boom"):
        _chunks(JobRecords(lambda row: {}, last_words), _failing())


def test_a_client_going_away_closes_the_source() -> None:
    closed = asyncio.Event()

    async def endless() -> AsyncIterator[Event]:
        try:
            yield START
            await asyncio.Event().wait()  # a run that would go on
            yield End()
        finally:
            closed.set()

    async def run() -> None:
        stream = relay(endless(), asyncio.Event(), AgentChunks())
        assert '"start"' in await anext(stream)
        await stream.aclose()  # the client went away
        assert closed.is_set()

    asyncio.run(run())
