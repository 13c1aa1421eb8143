"""MindsDB itself for the side-by-side benchmarks (`peer`): started from a folder holding its virtualenv
(`mindsdb-venv/`, with `mindsdb[kb]`) and data folder (`mindsdb-data/config.json`), HTTP API only, and
stopped with every process it started."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx


@contextlib.contextmanager
def mindsdb_server(home: Path, port: int, startup_timeout: float = 300.0) -> Iterator[str]:
    """MindsDB from `home/mindsdb-venv`, HTTP API only, with `home/mindsdb-data` (config.json, storage):
    started in a session of its own, ready once `/api/status` answers, stopped at the end (SIGTERM to the
    process and its children, which a SIGTERM to the main process alone would orphan; SIGKILL after 30 s)."""
    python = home / "mindsdb-venv" / "bin" / "python"
    data = home / "mindsdb-data"
    if not python.exists() or not (data / "config.json").exists():
        raise SystemExit(f"--mindsdb {home}: expected {python} and {data / 'config.json'}")
    log = (data / "log.txt").open("ab")
    proc = subprocess.Popen(
        [str(python), "-m", "mindsdb", "--api=http", "--no_studio", f"--config={data / 'config.json'}"],
        cwd=data,
        env={**os.environ, "MINDSDB_STORAGE_DIR": str(data)},
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"MindsDB exited with {proc.returncode}; see {data / 'log.txt'}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/api/status", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"MindsDB did not answer within {startup_timeout:g}s")
            time.sleep(1)
        print(f"  MindsDB (pid {proc.pid}) ready at {base}", flush=True)
        yield base
    finally:
        _stop_tree(proc)
        log.close()


def _stop_tree(proc: subprocess.Popen[bytes]) -> None:
    children = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(proc.pid)], capture_output=True, text=True, check=False
    ).stdout.split()
    pids = [proc.pid, *map(int, children)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    alive = pids
    while alive and time.monotonic() < deadline:
        proc.poll()
        alive = [pid for pid in pids if _alive(pid)]
        time.sleep(0.5)
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()


def _alive(pid: int) -> bool:
    state = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True, check=False)
    return bool(state.stdout.strip()) and not state.stdout.strip().startswith("Z")
