"""A per-credential request-rate limit (`AGENTKB_RATE_LIMIT_PER_MIN`; off by default): 429 problem+json
with `Retry-After` once a credential (or, with no credential, a client address) has made that many requests
in the last minute. A moving window from the `limits` library, kept in this process's memory: each API
process counts on its own, so N processes behind one balancer allow up to N times the limit."""

from __future__ import annotations

import math
import time

from starlette.types import ASGIApp, Receive, Scope, Send

from agentkb.api.auth import HEALTH_PATHS
from agentkb.api.responses import Problem
from agentkb.service.types import Principal


def _subject(scope: Scope) -> str:
    """Whom a request counts against: its credential's principal, else the client address."""
    principal: Principal | None = scope.get("state", {}).get("principal")
    if principal is not None:
        return principal.id
    client = scope.get("client")
    return f"client:{client[0] if client else '-'}"


class RateLimit:
    """Runs inside `Authenticate`, so it counts requests by who sent them; health probes are not counted."""

    def __init__(self, app: ASGIApp, per_minute: int) -> None:
        self.app = app
        self.per_minute = per_minute
        # imported here: a server without AGENTKB_RATE_LIMIT_PER_MIN never adds this middleware
        from limits import RateLimitItemPerMinute
        from limits.aio.storage import MemoryStorage
        from limits.aio.strategies import MovingWindowRateLimiter

        self.item = RateLimitItemPerMinute(per_minute)
        self.limiter = MovingWindowRateLimiter(MemoryStorage())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in HEALTH_PATHS:
            await self.app(scope, receive, send)
            return
        subject = _subject(scope)
        if await self.limiter.hit(self.item, subject):
            await self.app(scope, receive, send)
            return
        stats = await self.limiter.get_window_stats(self.item, subject)
        retry_after = max(1, math.ceil(stats.reset_time - time.time()))
        response = Problem(
            429,
            "Too many requests",
            f"More than {self.per_minute} requests in a minute from this credential (or, without one, this "
            f"client address); retry in {retry_after} s",
        )
        response.headers["Retry-After"] = str(retry_after)
        await response(scope, receive, send)
