"""Server-sent events for `/completions/stream`, byte for byte as MindsDB sends them (spec §6), and for a
job's progress.

Each chunk is `data: <json.dumps(obj)>` and a blank line: default separators (spaces after `,` and
`:`), no `event:` or `id:` lines. An agent stream always ends with `{"type": "end"}`.

When the server shuts down, open streams end at once with a last event (see `service.platform.lifecycle`): an
agent stream with an error chunk saying so and `{"type": "end"}`, a job stream with the job's record as it
now is, marked `"shutdown": true`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, assert_never

import anyio
from fastapi.responses import StreamingResponse

from agentkb.service.platform import Stopped, until
from agentkb.service.types import Action, End, Error, Event, Output, Start, Step

log = logging.getLogger("agentkb.api.sse")

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
END_CHUNK: dict[str, Any] = {"type": "end"}
SHUTDOWN_MESSAGE = "The server is shutting down; the agent run was stopped before it finished"


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
    assert_never(event)


def encode(chunk: dict[str, Any]) -> str:
    return f"data: {json.dumps(chunk)}\n\n"


async def sse_chunks(events: AsyncIterator[Event], stop: asyncio.Event | None = None) -> AsyncIterator[str]:
    """Encode events as they come. An unexpected failure, or the server shutting down (`stop`), becomes an
    error chunk; the end chunk is always last (unless the client is gone, when there is nobody to send it
    to). Closing this generator closes `events`, which cancels the run."""
    ended = gone = False
    trace_id = ""
    try:
        async with aclosing(until(events, stop or asyncio.Event())) as running:
            async for event in running:
                if isinstance(event, Start):
                    trace_id = event.trace_id
                yield encode(to_chunk(event))
                if isinstance(event, End):
                    ended = True
                    break
    except (asyncio.CancelledError, GeneratorExit):
        gone = True
        raise
    except Stopped:
        log.info("agent stream of trace %s ended: the server is shutting down", trace_id or "-")
        yield encode(
            {"type": "error", "content": SHUTDOWN_MESSAGE, "error_type": "general", "trace_id": trace_id}
        )
    except Exception as exc:  # reported to the client, then the stream ends cleanly
        log.exception("agent stream failed")
        yield encode(
            {
                "type": "error",
                "content": f"Error in completion event generator: {exc}",
                "error_type": "general",
                "trace_id": "",
            }
        )
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            with anyio.CancelScope(shield=True):
                await close()
        if not ended and not gone:
            yield encode(END_CHUNK)


def sse_objects(
    objects: AsyncIterator[dict[str, Any]],
    stop: asyncio.Event,
    last_words: Callable[[dict[str, Any] | None], Awaitable[dict[str, Any]]],
) -> StreamingResponse:
    """A `text/event-stream` response of plain JSON objects (e.g. a job's record at each change). When
    `stop` is set (the server shuts down) the stream ends with `await last_words(last object sent)`."""

    async def chunks() -> AsyncIterator[str]:
        last: dict[str, Any] | None = None
        try:
            async with aclosing(until(objects, stop)) as running:
                async for obj in running:
                    last = obj
                    yield encode(obj)
        except Stopped:
            yield encode(await last_words(last))

    return StreamingResponse(chunks(), media_type="text/event-stream", headers=SSE_HEADERS)


def sse_response(events: AsyncIterator[Event], stop: asyncio.Event | None = None) -> StreamingResponse:
    """A `text/event-stream` response; each chunk is sent (and flushed) as soon as it is produced. When
    `stop` is set (the server shuts down) the run is cancelled and the stream ends with an error chunk."""
    return StreamingResponse(sse_chunks(events, stop), media_type="text/event-stream", headers=SSE_HEADERS)
