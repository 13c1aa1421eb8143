"""A server that owns its process (`agentkb serve`, `serve --workers`) tunes its garbage collector once
started (`cli.server.settle_garbage_collector`): start-up's objects frozen, young collections every 50,000
allocations, the collector (paused while the server starts) running again. Checked in a process of its own,
through `make_server`, the function `serve` uses."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx

from tests.conftest import free_port

SERVER = """
import gc, sys
gc.disable()  # as `agentkb serve` does while it starts
from fastapi import FastAPI
from agentkb.cli.server import make_server
from agentkb.service.platform.lifecycle import Shutdown

app = FastAPI()
app.state.shutdown = Shutdown()

@app.get("/gc")
def collector() -> dict:
    return {"threshold": gc.get_threshold()[0], "frozen": gc.get_freeze_count(), "enabled": gc.isenabled()}

make_server(app, host="127.0.0.1", port=int(sys.argv[1]), grace_s=2).run()
"""


def test_a_served_process_freezes_start_up_and_collects_young_objects_less_often() -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/gc", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)
        state = answer.json()
        assert state["threshold"] == 50_000
        assert state["frozen"] > 10_000  # the modules and the app, at least
        assert state["enabled"]  # the collector paused for the start runs again
    finally:
        proc.terminate()
        proc.wait(timeout=30)
