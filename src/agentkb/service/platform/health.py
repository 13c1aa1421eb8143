"""Readiness: may this process take traffic? (`/health` is liveness and asks nothing of the database.)

Ready means: not shutting down, PostgreSQL answers within `timeout_s`, and its schema is at this code's
migration heads. One short query on a pooled connection; a connection the database dropped (a restart)
is retried once on a fresh one, so the first probe after PostgreSQL comes back already passes.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from agentkb.service.platform.lifecycle import Shutdown
from agentkb.storage import migrate
from agentkb.storage.db import Database

log = logging.getLogger("agentkb.health")
READY_TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    detail: str


class HealthService:
    def __init__(self, db: Database, shutdown: Shutdown, *, timeout_s: float = READY_TIMEOUT_S) -> None:
        self.db = db
        self.shutdown = shutdown
        self.timeout_s = timeout_s
        self._heads: frozenset[str] | None = None
        self._last_ready: bool | None = None

    async def readiness(self) -> Readiness:
        result = await self._check()
        if result.ready != self._last_ready:  # log changes, not every probe
            (log.info if result.ready else log.warning)("readiness: %s", result.detail)
            self._last_ready = result.ready
        return result

    async def _check(self) -> Readiness:
        if self.shutdown.begun:
            return Readiness(False, "The server is shutting down")
        if self._heads is None:
            self._heads = await asyncio.to_thread(migrate.head_revisions)
        try:
            async with asyncio.timeout(self.timeout_s):
                applied = await self._applied()
        except TimeoutError:
            return Readiness(False, f"PostgreSQL did not answer within {self.timeout_s:g} s")
        except Exception as exc:  # noqa: BLE001 - any failure to reach the database means "not ready"
            log.debug("readiness check failed", exc_info=exc)
            return Readiness(False, "PostgreSQL is unreachable")
        if applied != self._heads:
            return Readiness(
                False,
                f"Database migrations are pending: the database is at {_names(applied)}, "
                f"this server needs {_names(self._heads)}",
            )
        return Readiness(True, "ready")

    async def _applied(self) -> frozenset[str]:
        try:
            async with self.db.connect() as conn:
                return await migrate.applied_revisions(conn)
        except Exception:  # noqa: BLE001 - a pooled connection the server dropped: once more, fresh
            async with self.db.connect() as conn:
                return await migrate.applied_revisions(conn)


def _names(revisions: frozenset[str]) -> str:
    return ", ".join(sorted(revisions)) or "no revision"
