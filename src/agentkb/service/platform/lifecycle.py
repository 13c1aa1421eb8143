"""A process's shutdown as its services and HTTP routes see it.

`begin()` is called once a stop was asked for (SIGTERM/SIGINT, see `runtime.ExitGuard` and the CLI):

- `stopping` is set at once: readiness answers 503, agent completion streams end with an error chunk and
  `{"type": "end"}`, and the runtime stops the ingestion worker (it claims nothing more; its running job is
  cancelled, so the job's transaction rolls back);
- `jobs_released` is set once the worker's running async job was handed back to the queue (or that was
  given up on): job event streams then send their last event — the job as it now is — and end.

`until(items, event)` is how a stream (the API's and the console's server-sent events) stops at once when
one of these events is set.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, TypeVar

import anyio

T = TypeVar("T")


class Shutdown:
    def __init__(self) -> None:
        self.stopping = asyncio.Event()
        self.jobs_released = asyncio.Event()

    def begin(self) -> None:
        self.stopping.set()

    @property
    def begun(self) -> bool:
        return self.stopping.is_set()


class Stopped(Exception):
    """The server began shutting down while a stream was open."""


async def until(items: AsyncIterator[T], stop: asyncio.Event) -> AsyncGenerator[T, None]:
    """`items` until they end, or until `stop` is set: then `Stopped` is raised at once, even while
    `items` is waiting for its next one. `items` runs in a task of its own (one item ahead at most) and is
    cancelled and closed there, so its own clean-up (cancelling an agent run, storing its trace) runs as
    when a client goes away; an error it raises is raised here."""
    box: asyncio.Queue[tuple[bool, Any]] = asyncio.Queue(maxsize=1)

    async def pump() -> None:
        try:
            async for item in items:
                await box.put((True, item))
            await box.put((False, None))
        except Exception as exc:  # handed to the consumer, raised there
            await box.put((False, exc))
        finally:
            close = getattr(items, "aclose", None)
            if close is not None:
                await close()

    pumping = asyncio.create_task(pump(), name="stream-source")
    stopped = asyncio.ensure_future(stop.wait())
    getting: asyncio.Future[tuple[bool, Any]] | None = None
    try:
        while True:
            getting = asyncio.ensure_future(box.get())
            await asyncio.wait({getting, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if stopped.done():
                raise Stopped
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
