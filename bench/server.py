"""`agentkb serve` as a subprocess for the benchmarks: a fresh temporary data directory (or a given one),
a free port, ready once `/api/status` answers 200, stopped (SIGTERM) on exit. `AGENTKB_*` variables of
this process are passed through; `env` adds or overrides variables.

    with agentkb_server() as base:          # base is the URL (a str), e.g. "http://127.0.0.1:41234"
        httpx.get(f"{base}/api/status")
        base.pid, base.data_dir, base.log_path

`py_spy(pid, path)` records a py-spy profile of a process (collapsed stacks) while its block runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

PROJECT = "mindsdb"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server(str):
    """The base URL of a running server, with its process, data directory and log file."""

    proc: subprocess.Popen[bytes]
    data_dir: Path
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def kbs(self) -> str:
        """The knowledge-base collection URL of the default project."""
        return f"{self}/api/projects/{PROJECT}/knowledge_bases"


@contextmanager
def agentkb_server(
    env: dict[str, str] | None = None,
    data_dir: Path | None = None,
    startup_timeout: float = 180.0,
    args: list[str] | None = None,
) -> Iterator[Server]:
    """`args`: more `agentkb serve` options (e.g. `["--workers", "2"]`)."""
    temp = None
    if data_dir is None:
        temp = tempfile.mkdtemp(prefix="agentkb-bench-")
        data_dir = Path(temp)
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = data_dir / "server.log"
    child_env = {**os.environ, **(env or {})}
    log = log_path.open("ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentkb",
            "serve",
            "--data-dir",
            str(data_dir),
            "--port",
            str(port),
            *(args or []),
        ],
        env=child_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = Server(f"http://127.0.0.1:{port}")
    base.proc, base.data_dir, base.log_path = proc, data_dir, log_path
    try:
        started = time.monotonic()
        while True:
            try:
                if httpx.get(f"{base}/api/status", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise RuntimeError(f"agentkb serve exited with {proc.returncode}; log:\n{_tail(log_path)}")
            if time.monotonic() - started > startup_timeout:
                raise RuntimeError(
                    f"agentkb serve not ready after {startup_timeout:.0f}s; log:\n{_tail(log_path)}"
                )
            time.sleep(0.05)
        yield base
    finally:
        stop(proc)
        log.close()
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Ends `proc` if it still runs: SIGTERM, then a kill if it has not exited within 60 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextmanager
def py_spy(pid: int, path: Path | None, rate: int = 200) -> Iterator[None]:
    """Record `py-spy record --format raw` (collapsed stacks, idle threads left out) of `pid` into `path`
    while the block runs; does nothing when `path` is None or py-spy is missing."""
    if path is None or shutil.which("py-spy") is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [
            "py-spy",
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--rate",
            str(rate),
            "--output",
            str(path),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


_BORING = (
    "runpy",
    "threading.py",
    "typer/",
    "uvicorn/",
    "starlette/",
    "fastapi/",
    "asyncio/",
    "anyio/",
    "concurrent/futures",
    "agentkb/cli.py",
    "agentkb/__main__.py",
    "agentkb/api/middleware.py",
)


def top_frames(path: Path, n: int = 15, interesting: bool = False) -> list[tuple[str, float, float]]:
    """From a collapsed-stacks file: the `n` frames with the most samples, as
    (frame, % of samples anywhere in the stack, % of samples as the innermost frame). `interesting`
    leaves out the frames every request has (runpy, uvicorn, starlette, asyncio, ...)."""
    total = 0
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        samples = int(count)
        total += samples
        frames = stack.split(";")
        for frame in set(frames):
            inclusive[frame] += samples
        own[frames[-1]] += samples
    if not total:
        return []
    ranked = [
        (f, c) for f, c in inclusive.most_common() if not (interesting and any(b in f for b in _BORING))
    ]
    return [(f, round(100 * c / total, 1), round(100 * own[f] / total, 1)) for f, c in ranked[:n]]


def cpu_seconds(server: Server) -> dict[str, float]:
    """CPU seconds (user + system) used so far by the server's Python process and by its PostgreSQL
    processes (the embedded one under its data directory; exited backends no longer count)."""
    import psutil

    def used(p: psutil.Process) -> float:
        try:
            t = p.cpu_times()
            return t.user + t.system
        except psutil.Error:
            return 0.0

    python = used(psutil.Process(server.pid))
    postgres = sum(used(p) for p in postgres_processes(server))
    return {"server_python_cpu_s": round(python, 3), "postgres_cpu_s": round(postgres, 3)}


def postgres_processes(server: Server) -> list[Any]:
    """The server's embedded PostgreSQL: its postmaster (found by its data directory) and every process
    under it (psutil.Process objects)."""
    import psutil

    marker = str(server.data_dir / "pg")
    found = []
    for p in psutil.process_iter(attrs=("name", "cmdline")):
        if p.info["name"] == "postgres" and marker in " ".join(p.info["cmdline"] or []):
            with contextlib.suppress(psutil.Error):
                found += [p, *p.children(recursive=True)]
    return found


def memory(server: Server) -> dict[str, float]:
    """Memory now, in MiB: the server's processes (the `agentkb serve` process and its children but
    PostgreSQL: RSS, and the peak RSS of the main one, VmHWM), and PostgreSQL's process tree: the sum of
    RSS (counts shared memory, `shared_buffers`, once per process that touched it) and of PSS (shared pages
    split between the processes sharing them: what the tree holds)."""
    import psutil

    mib = 2**20
    main = psutil.Process(server.pid)
    postgres = postgres_processes(server)
    pg_pids = {p.pid for p in postgres}
    ours = [main, *(c for c in main.children(recursive=True) if c.pid not in pg_pids)]
    rss = pss = 0
    for p in postgres:
        with contextlib.suppress(psutil.Error):
            info = p.memory_full_info()
            rss, pss = rss + info.rss, pss + info.pss
    peak = next(
        (
            int(line.split()[1]) * 1024
            for line in Path(f"/proc/{server.pid}/status").read_text().splitlines()
            if line.startswith("VmHWM:")
        ),
        0,
    )
    return {
        "server_rss_mib": round(sum(p.memory_info().rss for p in ours) / mib, 1),
        "server_peak_rss_mib": round(peak / mib, 1),
        "server_processes": len(ours),
        "postgres_rss_sum_mib": round(rss / mib, 1),
        "postgres_pss_sum_mib": round(pss / mib, 1),
        "postgres_processes": len(postgres),
    }


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: round(after[k] - before[k], 3) for k in before}
