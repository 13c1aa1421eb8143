"""`agentkb serve`'s uvicorn server, with agentkb's shutdown built on uvicorn's own.

On SIGTERM/SIGINT uvicorn closes its listening sockets (no new connections), asks idle keep-alive
connections to close, waits `timeout_graceful_shutdown` for the requests in flight, cancels what is left
and then runs the app's lifespan shutdown (the runtime closes). What agentkb adds:

- when uvicorn's shutdown starts, the app's `Shutdown` begins: the ingestion worker stops and hands its
  running job back to the queue, and open event streams (agent runs, job events) send a last event and
  end — so the connections uvicorn waits for close at once instead of after the job or run;
- requests get half the grace period (`AGENTKB_SHUTDOWN_GRACE_S`), closing the runtime the other half,
  and a deadline ends the process when the grace period is over whatever is left (`ExitGuard`);
- the addresses the sockets are bound to reach the app (`agentkb.app.listening`): a non-loopback one keeps
  authentication on, whatever `AGENTKB_HOST` says; uvicorn's own reading of `X-Forwarded-*` is off (the app
  reads them from `AGENTKB_TRUSTED_PROXIES` only);
- a second signal exits at once (uvicorn itself only force-quits on a second SIGINT, and even then waits
  for nothing but still runs no lifespan shutdown).
"""

from __future__ import annotations

import gc
import signal
import socket
from collections.abc import Callable
from functools import partial
from types import FrameType
from typing import Any

import uvicorn

from agentkb.app import listening
from agentkb.runtime import ExitGuard
from agentkb.service.platform import Shutdown

GC_YOUNG_THRESHOLD = 50_000  # allocations between young collections (CPython's default: 700)


def settle_garbage_collector() -> None:
    """Once a server process has started: what start-up made (modules, the app, its services: ~160,000
    objects) moves to the collector's permanent generation (`gc.freeze`), so full collections no longer walk
    it, and young collections run every 50,000 allocations instead of every 700. Otherwise full collections
    grow slower as the heap grows and land inside almost every large insert, which allocates many short-lived
    objects (docs/benchmarks.md has the insert figures). `agentkb serve` pauses the collector while it starts
    (`gc.disable()` before its imports: two full collections of the growing heap cost ~100 ms of a start), so
    it is started again here, after the freeze. Nothing is collected first: that walk (~100 ms, in front of
    the first request) finds only start-up's few unreachable objects (682, 62 KB, on a started server),
    which stay."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)
    gc.enable()


class GracefulServer(uvicorn.Server):
    def __init__(
        self,
        config: uvicorn.Config,
        shutdown: Shutdown,
        grace_s: float,
        *,
        settle_gc: bool = False,
        on_listening: Callable[[list[str]], None] | None = None,
    ) -> None:
        """`settle_gc`: once started, tune this process's garbage collector (`settle_garbage_collector`);
        for a server that owns its process (`agentkb serve`), not one in a thread of another program.
        `on_listening`: called once started with the addresses its sockets are bound to."""
        super().__init__(config)
        self.app_shutdown = shutdown
        self.guard = ExitGuard(grace_s)
        self.settle_gc = settle_gc
        self.on_listening = on_listening

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.on_listening is not None:
            self.on_listening(self.bound_addresses())
        if self.settle_gc and self.started:
            settle_garbage_collector()

    def bound_addresses(self) -> list[str]:
        """The local addresses of the listening sockets (an IP address, or a unix socket's path)."""
        found: list[str] = []
        for server in self.servers:
            for sock in server.sockets:
                name = sock.getsockname()
                found.append(str(name[0]) if isinstance(name, tuple) else str(name))
        return found

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.guard(sig)  # the second signal ends the process here
        super().handle_exit(sig, frame)

    def request_stop(self) -> None:
        """Begin the graceful stop a SIGTERM begins, unless a signal began one already (`serve --workers`:
        the supervisor asks its processes to stop, and a terminal's Ctrl-C may have reached them first)."""
        if not self.guard.signalled:
            self.handle_exit(signal.SIGTERM, None)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.app_shutdown.begin()
        await super().shutdown(sockets)


def serve(app: Any, *, host: str, port: int, grace_s: float) -> None:
    """Run `app` (from `agentkb.app.create_app`) until a signal stops it."""
    server = make_server(app, host=host, port=port, grace_s=grace_s)
    server.run()
    if not server.started:
        raise SystemExit(STARTUP_FAILURE)


STARTUP_FAILURE = 3  # uvicorn's exit status when the lifespan or the bind failed


def make_server(app: Any, *, host: str, port: int, grace_s: float) -> GracefulServer:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        ws="none",  # the app has no WebSocket route: uvicorn's WebSocket library is not even imported
        # X-Forwarded-* are read by the app, from AGENTKB_TRUSTED_PROXIES only (uvicorn would trust 127.0.0.1)
        proxy_headers=False,
        # requests in flight get half the grace period; the runtime closes in the other half
        timeout_graceful_shutdown=grace_s / 2,  # type: ignore[arg-type]  # annotated int, used as a float
    )
    return GracefulServer(
        config, app.state.shutdown, grace_s, settle_gc=True, on_listening=partial(listening, app)
    )
