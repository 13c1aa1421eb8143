"""Reads meant for the read replica (`AGENTKB_DATABASE_READ_URL`), sent there only while it can answer them
as well as the primary would; otherwise to the primary, never as an error.

- **Lag.** A monitor task polls both servers every `poll_s`: the primary's `pg_current_wal_lsn()`, the
  replica's `pg_is_in_recovery()` and `pg_last_wal_replay_lsn()`. The replica's lag is how long ago the
  primary had WAL the replica has not replayed yet (from the primary's positions of the last polls: no
  clock of the replica's is read, and an idle primary makes no lag). Past `max_lag_s`, or while the
  replica does not answer, its reads go to the primary: a warning once, `agentkb_read_replica_usable` 0,
  `agentkb_read_replica_bypassed_total` counts them; the monitor keeps polling and takes it back when it
  has caught up. A replica that is not in recovery (the primary itself, a copy kept by other means, a
  promoted standby) is taken as current.
- **Read-your-writes**, when the caller asks (`reading_your_writes`, set per request from the
  `X-Agentkb-Read-Your-Writes` header, or `AGENTKB_READ_YOUR_WRITES` for every request): the read goes to
  the replica only if it has replayed this process's last write. The primary's `Database.writes` counts
  writes as they end (nothing more per write); a read that finds it moved reads `pg_current_wal_lsn()`
  once on the primary — at or past every commit counted — then compares the replica's replay position
  (the last poll's, read again when that is short). Writes through other processes are not known here.
- **A read the replica refuses** (its connection lost, a table it has not replayed yet, a query
  cancelled by a conflict with recovery) runs again on the primary: reads are safe to repeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

import psycopg
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb import metrics
from agentkb.storage.db import Database, connection_lost

log = logging.getLogger("agentkb.replica")
T = TypeVar("T")
CHECK_TIMEOUT_S = 2.0  # a poll of either server that takes longer counts as "does not answer"
# what the replica refusing a read looks like, other than a lost connection: a table (a KB's chunk table)
# it has not replayed yet, a query cancelled by a conflict with recovery
_REPLICA_BEHIND = (psycopg.errors.UndefinedTable, psycopg.errors.SerializationFailure)

_read_your_writes: ContextVar[bool | None] = ContextVar("agentkb_read_your_writes", default=None)


@contextlib.contextmanager
def reading_your_writes(wanted: bool | None) -> Iterator[None]:
    """Reads inside the block see this process's writes (True), may lag (False), or follow the
    setting (None)."""
    token = _read_your_writes.set(wanted)
    try:
        yield
    finally:
        _read_your_writes.reset(token)


def lsn(value: str | None) -> int | None:
    """A `pg_lsn` text (`16/B374D848`) as a number."""
    if value is None:
        return None
    high, _, low = value.partition("/")
    return (int(high, 16) << 32) + int(low, 16)


@dataclass(slots=True)
class ReplicaState:
    reachable: bool = True
    standby: bool = True  # in recovery: it replays the primary's WAL (else it is taken as current)
    replay_lsn: int | None = None
    lag_s: float = 0.0


class ReadRouter:
    """Runs reads on the replica or the primary (see the module's text). Without a replica, on the
    primary. `start()` the monitor on the event loop that reads; `close()` stops it."""

    def __init__(
        self,
        primary: Database,
        replica: Database | None,
        *,
        max_lag_s: float = 30.0,
        read_your_writes: bool = False,
        poll_s: float | None = None,
    ) -> None:
        self.primary = primary
        self.replica = replica
        self.max_lag_s = max_lag_s
        self.read_your_writes = read_your_writes
        self.poll_s = poll_s if poll_s is not None else min(1.0, max(0.1, max_lag_s / 4))
        self.state = ReplicaState()
        self.usable = replica is not None
        self._history: deque[tuple[float, int]] = deque()  # (when, the primary's WAL position), oldest first
        self._write_lsn = 0  # the primary's position after this process's last counted write
        self._writes_seen = primary.writes
        self._task: asyncio.Task[None] | None = None
        if replica is not None:
            metrics.read_replica_usable.set(1)

    def start(self) -> None:
        if self.replica is not None and self._task is None:
            self._task = asyncio.create_task(self._monitor(), name="agentkb-replica-monitor")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def run(self, read: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """`read` on a connection (autocommit: `Database.read()`) of the replica if it may answer, else of
        the primary; a read the replica refuses runs again on the primary."""
        if self.replica is not None:
            reason = await self._bypass()
            if reason is None:
                try:
                    async with self.replica.read() as conn:
                        return await read(conn)
                except (DBAPIError, psycopg.Error) as exc:
                    if connection_lost(exc):
                        self._set_unreachable(exc)
                    elif not isinstance(getattr(exc, "orig", exc), _REPLICA_BEHIND):
                        raise
                    reason = "failed"
            metrics.read_replica_bypassed.labels(reason).inc()
        async with self.primary.read() as conn:
            return await read(conn)

    # -- the choice ----------------------------------------------------------------------------------------

    async def _bypass(self) -> str | None:
        """Why this read must not go to the replica (None: it may)."""
        if not self.usable:
            return "unreachable" if not self.state.reachable else "lagging"
        wanted = _read_your_writes.get()
        if not (self.read_your_writes if wanted is None else wanted) or not self.state.standby:
            return None
        if self.primary.writes != self._writes_seen:
            seen = self.primary.writes
            async with self.primary.read() as conn:
                position = lsn(await conn.scalar(text("SELECT pg_current_wal_lsn()::text")))
            self._write_lsn = max(self._write_lsn, position or 0)
            self._writes_seen = seen
        replayed = self.state.replay_lsn
        if replayed is None or replayed < self._write_lsn:
            assert self.replica is not None
            try:
                async with self.replica.read() as conn:
                    replayed = lsn(await conn.scalar(text("SELECT pg_last_wal_replay_lsn()::text")))
            except (DBAPIError, psycopg.Error) as exc:
                if not connection_lost(exc):
                    raise
                self._set_unreachable(exc)
                return "unreachable"
            if replayed is None:  # not in recovery (any more): current
                return None
            self.state.replay_lsn = max(replayed, self.state.replay_lsn or 0)
        return "read_your_writes" if replayed < self._write_lsn else None

    # -- the monitor ---------------------------------------------------------------------------------------

    async def _monitor(self) -> None:
        while True:
            try:
                await self.check()
            except Exception:  # noqa: BLE001 - the monitor outlives any one poll
                log.exception("read replica check failed")
            await asyncio.sleep(self.poll_s)

    async def check(self) -> None:
        """One poll of both servers; the replica's state and whether it is used follow from it."""
        assert self.replica is not None
        now = time.monotonic()
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_S), self.primary.read() as conn:
                position = lsn(await conn.scalar(text("SELECT pg_current_wal_lsn()::text")))
            if position is not None:
                self._history.append((now, position))
        except Exception:  # noqa: BLE001 - no primary: the replica's lag cannot be told; keep the last
            log.debug("read replica check: the primary did not answer", exc_info=True)
        while len(self._history) > 2 and self._history[1][0] < now - 2 * self.max_lag_s - 10 * self.poll_s:
            self._history.popleft()
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_S), self.replica.read() as conn:
                row = (
                    await conn.execute(text("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text"))
                ).one()
        except Exception as exc:  # noqa: BLE001 - unreachable (or too slow): bypassed until it answers
            self._set_unreachable(exc)
            return
        self.state.reachable = True
        self.state.standby = bool(row[0])
        self.state.replay_lsn = lsn(row[1])
        self.state.lag_s = self._lag(time.monotonic())
        metrics.read_replica_lag.set(self.state.lag_s)
        self._set_usable(self.state.lag_s <= self.max_lag_s, f"{self.state.lag_s:.1f} s behind")

    def _lag(self, now: float) -> float:
        """Seconds since the primary first had WAL the replica has not replayed (0: it has all the primary
        had at the last poll; at least the age of the oldest poll kept when it lacks even that)."""
        replayed = self.state.replay_lsn
        if not self.state.standby or replayed is None or not self._history:
            return 0.0
        if replayed >= self._history[-1][1]:
            return 0.0
        since = next((when for when, position in self._history if position > replayed), self._history[-1][0])
        return now - since

    def _set_unreachable(self, exc: BaseException) -> None:
        if self.state.reachable:
            log.warning("read replica unreachable (%s): reads go to the primary", type(exc).__name__)
        self.state.reachable = False
        self._set_usable(False, "unreachable")

    def _set_usable(self, usable: bool, why: str) -> None:
        if usable != self.usable:
            if usable:
                log.info("read replica back in use (%s)", why)
            elif self.state.reachable:
                log.warning(
                    "read replica bypassed: %s (AGENTKB_READ_REPLICA_MAX_LAG_S %g): reads go to the primary",
                    why,
                    self.max_lag_s,
                )
            self.usable = usable
            metrics.read_replica_usable.set(1 if usable else 0)
