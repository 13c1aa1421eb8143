"""Server-sent events for the console's live parts (an agent's run, a job's progress): each item is one
`data: <json>` event; a stream ends early, without waiting for its next item, when the server shuts down."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, TypeVar

import anyio

SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
T = TypeVar("T")


def encode(obj: dict[str, Any]) -> str:
    return f"data: {json.dumps(obj, default=str)}\n\n"


async def until(items: AsyncIterator[T], stop: asyncio.Event) -> AsyncGenerator[T, None]:
    """`items` until they end or `stop` is set (then this ends at once). `items` is read in a task of its
    own, one item ahead at most, and closed there (so its clean-up runs as when a client goes away); an
    error it raises is raised here."""
    box: asyncio.Queue[tuple[bool, Any]] = asyncio.Queue(maxsize=1)

    async def pump() -> None:
        try:
            async for item in items:
                await box.put((True, item))
            await box.put((False, None))
        except Exception as exc:  # handed to the reader
            await box.put((False, exc))
        finally:
            close = getattr(items, "aclose", None)
            if close is not None:
                await close()

    pumping = asyncio.create_task(pump(), name="console-stream")
    stopped = asyncio.ensure_future(stop.wait())
    getting: asyncio.Future[tuple[bool, Any]] | None = None
    try:
        while True:
            getting = asyncio.ensure_future(box.get())
            await asyncio.wait({getting, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not getting.done():
                return
            more, value = getting.result()
            if not more:
                if isinstance(value, Exception):
                    raise value
                return
            yield value
    finally:
        for future in (getting, stopped, pumping):
            if future is not None:
                future.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.wait({pumping})
