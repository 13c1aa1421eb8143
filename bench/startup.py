"""Cold start of `agentkb serve` to the first 200 from /api/status (fresh data dir, then restart),
and resident memory (server process tree, embedded PostgreSQL included) before any model loads; with the
medians over the runs, and the time of `agentkb --help` and of `import agentkb.app` alone.

The details table's medians are over `--repeat` runs (3 by default); `agentkb --help` and the import are
timed as many times, each in a new interpreter."""

from __future__ import annotations

import argparse
import compileall
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

import agentkb
from bench.common import print_table, write_result


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tree_rss_mb(proc: psutil.Process, pg_dir: Path) -> tuple[float, float]:
    server = proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
    postgres = 0
    for p in psutil.process_iter(attrs=("name", "cmdline")):
        if p.info["name"] == "postgres" and str(pg_dir) in " ".join(p.info["cmdline"] or []):
            postgres = sum(q.memory_info().rss for q in [p, *p.children(recursive=True)])
    return server / 2**20, postgres / 2**20


def one_start(data_dir: Path) -> dict[str, Any]:
    port = _port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKB_")}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentkb", "serve", "--data-dir", str(data_dir), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # one client for the polls: a new one per poll costs tens of milliseconds (its TLS context), which
    # would be counted as the server's start
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=1) as client:
        try:
            while True:
                try:
                    if client.get("/api/status").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.01)
                if proc.poll() is not None or time.perf_counter() - started > 120:
                    raise RuntimeError("agentkb did not start")
            ready = time.perf_counter() - started
            client.get("/api/projects/mindsdb/agents")
            server_mb, pg_mb = _tree_rss_mb(psutil.Process(proc.pid), data_dir / "pg")
            return {
                "ready_s": round(ready, 2),
                "server_rss_mb": round(server_mb),
                "postgres_rss_mb": round(pg_mb),
            }
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


def _command_s(args: list[str]) -> float:
    """Wall-clock seconds of `python <args>` in a new interpreter, to its exit."""
    started = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench startup")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    # agentkb's bytecode written first, as installing the package writes it: with an editable install and
    # PYTHONDONTWRITEBYTECODE (as in CI), every start would otherwise compile every module again
    compileall.compile_dir(Path(agentkb.__file__).parent, quiet=1)
    load_before = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    rows = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            fresh = one_start(Path(tmp))
            restart = one_start(Path(tmp))
        rows.append(
            {
                "run": i + 1,
                "fresh_ready_s": fresh["ready_s"],
                "restart_ready_s": restart["ready_s"],
                "server_rss_mb": restart["server_rss_mb"],
                "postgres_rss_mb": restart["postgres_rss_mb"],
            }
        )
    help_s = [_command_s(["-m", "agentkb", "--help"]) for _ in range(args.repeat)]
    import_s = [_command_s(["-c", "import agentkb.app"]) for _ in range(args.repeat)]
    details = [
        {"what": "restart to first 200 (median)", "s": _median([r["restart_ready_s"] for r in rows])},
        {"what": "fresh data dir to first 200 (median)", "s": _median([r["fresh_ready_s"] for r in rows])},
        {"what": "`agentkb --help` (median)", "s": _median(help_s)},
        {"what": "`python -c 'import agentkb.app'` (median)", "s": _median(import_s)},
    ]
    print_table("startup: `agentkb serve` to first 200 from /api/status", rows)
    print_table("startup: medians", details)
    write_result(
        "startup",
        {
            "runs": rows,
            "details": details,
            "load_average_before": load_before,
            "note": "agentkb's bytecode written before the runs, as an installed package's (other packages': "
            + (
                "as found; PYTHONDONTWRITEBYTECODE is set"
                if sys.flags.dont_write_bytecode
                else "written at their first import"
            )
            + "); the server polled every 10 ms with one HTTP client"
            + f"; the run's niceness {os.nice(0)} (a negative one: a larger share of a shared machine's CPUs).",
            "load_average_after": " / ".join(f"{v:.2f}" for v in os.getloadavg()),
        },
    )


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2)
