"""`agentkb serve --workers N`: N server processes answering on one port, sharing one database.

The parent (this module) owns what must exist once: the embedded PostgreSQL when no `AGENTKB_DATABASE_URL`
is set (its URL — a unix socket — is handed to the processes through that variable), the secret key file
(made before any process reads it), the migrations, the listening socket (bound once; every process accepts
on it), and a Prometheus multiprocess directory (`PROMETHEUS_MULTIPROC_DIR`, unless one is set) so that
`/metrics`, whichever process answers it, counts for all of them. Each process is a whole `agentkb serve`:
the API, its in-process ingestion worker, its caches; what they share lives in PostgreSQL (docs/scaling.md).

Stopping: the first SIGTERM/SIGINT asks every process to stop gracefully (over a pipe, so a process that
got the terminal's Ctrl-C as well does not count it twice), waits for them for the grace period, then
stops the embedded PostgreSQL; a second signal kills them at once. A process that dies is replaced; one
that fails to start stops them all (exit status 3). A process whose parent dies stops itself.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType
from typing import Any

from agentkb.cli.server import STARTUP_FAILURE, GracefulServer, make_server
from agentkb.metrics import MULTIPROCESS_ENV
from agentkb.runtime import open_secret_box
from agentkb.settings import Settings
from agentkb.storage import migrate
from agentkb.storage.embedded import EmbeddedPostgres

log = logging.getLogger("agentkb.supervisor")
DATABASE_URL_ENV = "AGENTKB_DATABASE_URL"
POLL_S = 0.5
RESTART_PAUSE_S = 1.0

_spawn = multiprocessing.get_context("spawn")


class _Child:
    """One server process and the pipe its stop request goes through."""

    def __init__(self, sock: socket.socket, overrides: dict[str, Any]) -> None:
        self.stop_conn, child_end = _spawn.Pipe()
        self.process: BaseProcess = _spawn.Process(
            target=_child_main, args=(sock, overrides, child_end), name="agentkb-serve", daemon=False
        )
        self.process.start()
        child_end.close()

    def request_stop(self) -> None:
        with contextlib.suppress(OSError):  # it is gone already
            self.stop_conn.send(b"stop")


def serve_workers(settings: Settings, overrides: dict[str, Any], workers: int) -> None:
    """Run `workers` server processes until a signal stops them (see the module's text)."""
    embedded: EmbeddedPostgres | None = None
    metrics_dir: Path | None = None
    url = settings.database_url
    try:
        if url is None:
            embedded = EmbeddedPostgres(settings.pg_dir)
            url = embedded.start()
            os.environ[DATABASE_URL_ENV] = url
        open_secret_box(settings)  # makes the key file once, before the processes read it
        migrate.upgrade(url)
        if not os.environ.get(MULTIPROCESS_ENV):
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            metrics_dir = Path(tempfile.mkdtemp(prefix="metrics-", dir=settings.data_dir))
            os.environ[MULTIPROCESS_ENV] = str(metrics_dir)
        sock = _bind(settings.host, settings.port)
        try:
            code = _supervise(sock, overrides, workers, settings.shutdown_grace_s)
        finally:
            sock.close()
    finally:
        if embedded is not None:
            embedded.stop()
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    if code:
        raise SystemExit(code)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        log.error("cannot listen on %s:%d: %s", host, port, exc)
        raise SystemExit(STARTUP_FAILURE) from exc
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _supervise(sock: socket.socket, overrides: dict[str, Any], workers: int, grace_s: float) -> int:
    stop = threading.Event()
    children: list[_Child] = []

    def on_signal(sig: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            log.error("second %s: killing the server processes", signal.Signals(sig).name)
            for child in children:
                child.process.kill()
            os._exit(128 + sig)
        log.info("%s: stopping %d server processes", signal.Signals(sig).name, len(children))
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    code = 0
    try:
        children.extend(_Child(sock, overrides) for _ in range(workers))
        log.info("serving with %d processes: %s", workers, [c.process.pid for c in children])
        while not stop.wait(POLL_S):
            for index, child in enumerate(children):
                if child.process.is_alive():
                    continue
                _forget(child)
                if child.process.exitcode == STARTUP_FAILURE:
                    log.error("a server process failed to start: stopping")
                    code = STARTUP_FAILURE
                    stop.set()
                    break
                log.warning(
                    "server process %s ended (status %s): starting another",
                    child.process.pid,
                    child.process.exitcode,
                )
                time.sleep(RESTART_PAUSE_S)
                children[index] = _Child(sock, overrides)
        for child in children:
            child.request_stop()
        deadline = time.monotonic() + grace_s + 5
        for child in children:
            child.process.join(max(0.0, deadline - time.monotonic()))
            if child.process.is_alive():
                log.error("server process %s did not stop in time: killing it", child.process.pid)
                child.process.kill()
                child.process.join()
            _forget(child)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code


def _forget(child: _Child) -> None:
    """A dead process's live gauges leave the multiprocess directory."""
    if os.environ.get(MULTIPROCESS_ENV) and child.process.pid is not None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(child.process.pid)  # type: ignore[no-untyped-call]
    child.stop_conn.close()


def _child_main(sock: socket.socket, overrides: dict[str, Any], stop_conn: Connection) -> None:
    """One server process: the app on the shared socket, until a signal or the supervisor stops it."""
    gc.disable()  # while it starts, as `agentkb serve`: started again once it listens (settle_garbage_collector)
    from agentkb.app import create_app
    from agentkb.logs import configure

    settings = Settings(**overrides)
    configure(settings.log_level, settings.log_format)
    app = create_app(settings)
    server = make_server(app, host=settings.host, port=settings.port, grace_s=settings.shutdown_grace_s)
    threading.Thread(target=_await_stop, args=(stop_conn, server), name="agentkb-stop", daemon=True).start()
    server.run(sockets=[sock])
    if not server.started:
        raise SystemExit(STARTUP_FAILURE)


def _await_stop(stop_conn: Connection, server: GracefulServer) -> None:
    """Stop when the supervisor asks, or when it is gone (the pipe's end closes)."""
    try:
        stop_conn.recv()
    except (EOFError, OSError):
        log.warning("the supervisor is gone: stopping")
    server.request_stop()
