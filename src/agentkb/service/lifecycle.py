"""A process's shutdown as its services and HTTP routes see it.

`begin()` is called once a stop was asked for (SIGTERM/SIGINT, see `runtime.ExitGuard` and the CLI):

- `stopping` is set at once: readiness answers 503, agent completion streams end with an error chunk and
  `{"type": "end"}`, and the runtime stops the ingestion worker (it claims nothing more; its running job is
  cancelled, so the job's transaction rolls back);
- `jobs_released` is set once the worker's running async job was handed back to the queue (or that was
  given up on): job event streams then send their last event — the job as it now is — and end.
"""

from __future__ import annotations

import asyncio


class Shutdown:
    def __init__(self) -> None:
        self.stopping = asyncio.Event()
        self.jobs_released = asyncio.Event()

    def begin(self) -> None:
        self.stopping.set()

    @property
    def begun(self) -> bool:
        return self.stopping.is_set()
