"""An ASGI app served by uvicorn in a daemon thread, for the tests and the benchmarks (agentkb itself in
tests/conftest.py, the OpenAI stub in tests/openai_stub.py)."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn


class UvicornThread:
    """`start()` serves `app` on `host` (a free port unless `port` is given) and returns the port once uvicorn
    listens; `stop()` shuts it down. `config` goes to `uvicorn.Config`."""

    def __init__(
        self, app: Any, *, host: str = "127.0.0.1", port: int = 0, name: str = "uvicorn", **config: Any
    ) -> None:
        config = {"log_level": "warning", "access_log": False, **config}
        self.server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, **config))
        self.thread = threading.Thread(target=self.server.run, name=name, daemon=True)

    def start(self, timeout: float = 60) -> int:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{self.thread.name} did not start")
            time.sleep(0.01)
        return int(self.server.servers[0].sockets[0].getsockname()[1])

    def stop(self, timeout: float = 30) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=timeout)
