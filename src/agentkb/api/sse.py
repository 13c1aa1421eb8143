"""Server-sent events for `/completions/stream`, byte for byte as MindsDB sends them (spec §6), and for a
job's progress.

Each chunk is `data: <json.dumps(obj)>` and a blank line: default separators (spaces after `,` and
`:`), no `event:` or `id:` lines. An agent stream always ends with `{"type": "end"}`.

Each keeps only its encoder; the lifecycle is `service.platform.streams.relay`. When the server shuts down, open
streams end at once with a last event: an agent stream with an error chunk saying so and
`{"type": "end"}`, a job stream with the job's record as it now is, marked `"shutdown": true`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, assert_never

from fastapi.responses import StreamingResponse

from agentkb.service.platform import HEADERS, MEDIA_TYPE, RUN_STOPPED, Encoder, data, relay
from agentkb.service.types import Action, Delta, End, Error, Event, JobRow, Output, Start, Step

log = logging.getLogger("agentkb.api.sse")

END_CHUNK: dict[str, Any] = {"type": "end"}


def to_chunk(event: Event) -> dict[str, Any]:
    """The wire object of one event (MindsDB 25.14's LangChain-agent chunks; `sources` is ours)."""
    if isinstance(event, Start):
        return {"type": "start", "prompt": event.prompt, "trace_id": event.trace_id}
    if isinstance(event, Action):
        action = {"tool": event.tool, "tool_input": event.tool_input, "log": event.log}
        return {"actions": [action], "messages": [{"content": event.log}], "trace_id": event.trace_id}
    if isinstance(event, Step):
        action = {"tool": event.tool, "tool_input": event.tool_input, "log": event.log}
        return {
            "steps": [{"action": action, "observation": event.observation}],
            "messages": [{"content": event.observation}],
            "trace_id": event.trace_id,
        }
    if isinstance(event, Output):
        return {
            "output": event.answer,
            "messages": [{"content": event.answer}],
            "trace_id": event.trace_id,
            "sources": list(event.sources),
        }
    if isinstance(event, Error):
        return {
            "type": "error",
            "content": event.content,
            "error_type": event.error_type,
            "trace_id": event.trace_id,
        }
    if isinstance(event, End):
        return dict(END_CHUNK)
    if isinstance(event, Delta):  # MindsDB's stream sends the answer whole; its runs never ask for Deltas
        raise TypeError("MindsDB's agent stream has no chunk for the model's text as it comes")
    assert_never(event)


class AgentChunks(Encoder[Event]):
    """The agent stream: one chunk per event. An unexpected failure, or the server shutting down, becomes
    an error chunk; the end chunk is always last."""

    def __init__(self) -> None:
        self.trace_id = ""
        self.ended = False

    def item(self, item: Event) -> list[str]:
        if isinstance(item, Start):
            self.trace_id = item.trace_id
        self.ended = isinstance(item, End)
        return [data(to_chunk(item))]

    def ends(self, item: Event) -> bool:
        return isinstance(item, End)

    async def stopped(self) -> list[str]:
        log.info("agent stream of trace %s ended: the server is shutting down", self.trace_id or "-")
        error = {"type": "error", "content": RUN_STOPPED, "error_type": "general"}
        return [data({**error, "trace_id": self.trace_id})]

    def failed(self, exc: Exception) -> list[str]:
        log.error("agent stream failed", exc_info=exc)
        content = f"Error in completion event generator: {exc}"
        return [data({"type": "error", "content": content, "error_type": "general", "trace_id": ""})]

    async def last(self) -> list[str]:
        return [] if self.ended else [data(END_CHUNK)]


class JobRecords(Encoder[JobRow]):
    """A job's record at each change. When the server shuts down the stream ends with
    `await last_words(last record sent)`."""

    def __init__(
        self,
        record: Callable[[JobRow], dict[str, Any]],
        last_words: Callable[[dict[str, Any] | None], Awaitable[dict[str, Any]]],
    ) -> None:
        self.record = record
        self.last_words = last_words
        self.sent: dict[str, Any] | None = None

    def item(self, item: JobRow) -> list[str]:
        self.sent = self.record(item)
        return [data(self.sent)]

    async def stopped(self) -> list[str]:
        return [data(await self.last_words(self.sent))]


def sse_stream(chunks: AsyncIterator[str]) -> StreamingResponse:
    """A `text/event-stream` response; each chunk is sent (and flushed) as soon as it is produced."""
    return StreamingResponse(chunks, media_type=MEDIA_TYPE, headers=HEADERS)


def sse_response(events: AsyncIterator[Event], stop: asyncio.Event) -> StreamingResponse:
    """The agent stream's response. When `stop` is set (the server shuts down) the run is cancelled and
    the stream ends with an error chunk and the end chunk."""
    return sse_stream(relay(events, stop, AgentChunks()))
