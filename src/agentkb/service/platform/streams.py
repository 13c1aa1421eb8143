"""One lifecycle for every server-sent event stream (the MindsDB agent stream, `/v1` chat chunks, job
progress, the console's chat and job streams): each protocol writes only its `Encoder`.

`relay(items, stop, encoder)` reads `items` (through `lifecycle.until`, so the stream stops at once when
`stop` is set), hands each to `encoder.item` and sends what it returns. Then, once:

- the server began shutting down (`stop`): `encoder.stopped()`, its final words;
- `items` raised: `encoder.failed(exc)` (by default the error is raised on, as before any encoder);
- in every case but a client gone away: `encoder.last()`, the stream's closing chunks (an end event, `[DONE]`).

`items` is closed whatever happens, so a run's own clean-up (cancelling it, storing its trace) runs. Every
stream is sent with the same `HEADERS` and `MEDIA_TYPE`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import aclosing
from typing import Any, Generic, TypeVar

import anyio

from agentkb.service.platform.lifecycle import Stopped, until

T = TypeVar("T")

MEDIA_TYPE = "text/event-stream"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
# the error an agent run's stream (any protocol) ends with when the server shuts down
RUN_STOPPED = "The server is shutting down; the agent run was stopped before it finished"


def data(obj: Any, *, default: Callable[[Any], Any] | None = None) -> str:
    """One `data: <json>` event: `json.dumps`'s default separators, no `event:` or `id:` line."""
    return f"data: {json.dumps(obj, default=default)}\n\n"


class Encoder(Generic[T]):
    """A protocol's wire format over a stream of items. `item` is called for each item read; the hooks
    after it have defaults that send nothing (and raise a failure on)."""

    def item(self, item: T) -> Iterable[str]:
        raise NotImplementedError

    def ends(self, item: T) -> bool:
        """Whether `item` is the stream's last: nothing more is read after it."""
        return False

    async def stopped(self) -> Iterable[str]:
        """What to send when the server began shutting down while the stream was open."""
        return ()

    def failed(self, exc: Exception) -> Iterable[str]:
        """What to send when reading the items failed."""
        raise exc

    async def last(self) -> Iterable[str]:
        """What ends the stream (unless the client went away)."""
        return ()


async def relay(items: AsyncIterator[T], stop: asyncio.Event, encoder: Encoder[T]) -> AsyncIterator[str]:
    """The stream's chunks: `items` through `encoder`, stopping when `stop` is set (see the module)."""
    try:
        try:
            async with aclosing(until(items, stop)) as running:
                async for item in running:
                    for chunk in encoder.item(item):
                        yield chunk
                    if encoder.ends(item):
                        break
        except Stopped:
            for chunk in await encoder.stopped():
                yield chunk
        except Exception as exc:  # the encoder tells the client, or raises it on (a client gone away is
            # a CancelledError or GeneratorExit: not caught, nothing more is sent)
            for chunk in encoder.failed(exc):
                yield chunk
        for chunk in await encoder.last():
            yield chunk
    finally:
        close = getattr(items, "aclose", None)
        if close is not None:  # never started (the client left at once): close it here
            with anyio.CancelScope(shield=True):
                await close()
