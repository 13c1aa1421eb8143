"""What the doors need to know of the database's own state: whether an error means PostgreSQL is
unreachable (a restart, a failover in progress: answer 503 and ask for a retry, not 500), and how a request
asks to read its own writes from a read replica (`storage.read_routing`)."""

from __future__ import annotations

from agentkb.storage.db import connection_lost
from agentkb.storage.read_routing import reading_your_writes

RETRY_AFTER_S = 2  # a failover's promotion and the pools' reconnection take about this long (docs/scaling.md)
READ_YOUR_WRITES_HEADER = "x-agentkb-read-your-writes"


def database_unavailable(exc: BaseException) -> bool:
    """`exc` says PostgreSQL is unreachable or went away, not that the request was wrong."""
    return connection_lost(exc)


__all__ = ["READ_YOUR_WRITES_HEADER", "RETRY_AFTER_S", "database_unavailable", "reading_your_writes"]
