"""Login throttling: failed logins and invalid credentials, counted per user name and per client address
in PostgreSQL (so every API process sharing the database counts together), with exponential back-off.

Each user name and each client address has `login_free_attempts` failures free; every failure after them
blocks the subject for `login_backoff_s`, doubling with each further failure, at most `login_backoff_max_s`.
A blocked subject's attempts are refused (429, `Retry-After`) without the password or key being compared,
so a block answers the same for a right and a wrong guess. A successful login starts the counts of its user
name and client address again; failures are forgotten once `login_window_s` passes without one.

- **Logins** (`POST /api/login`, the console's form) are counted *before* the password is compared, in one
  atomic upsert per subject: concurrent guesses each take their own number, so no burst gets past the free
  attempts; the success undoes the count.
- **Invalid credentials** (an unknown, expired or revoked token or API key) count against the client
  address once refused. While that address is blocked, its requests with a credential are refused before
  the lookup, from this process's memory of the block (learnt from its own failures and logins: no
  database work per request). A credential this process has accepted within `TRUSTED_FOR_S` still passes
  (and is still looked up, so a revoke holds), so that clients sharing an address with a guesser (a proxy,
  a NAT) keep their sessions.

Subjects are `user:<HMAC of the user name, keyed by the server's secret key>` and `client:<address>` (an
IPv6 client by its /64 network, the block one host is usually given).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import time
from collections import OrderedDict
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb import metrics
from agentkb.errors import TooManyRequests
from agentkb.settings import Settings
from agentkb.storage import login_failures as repo
from agentkb.storage.db import Database
from agentkb.storage.login_failures import Backoff

TRUSTED_FOR_S = 3600.0  # a credential accepted this recently passes a block of its client address
MAX_REMEMBERED = 10_000  # blocks and accepted credentials held in memory, at most each


def client_subject(host: str | None) -> str:
    """The subject a client address counts against."""
    if not host:
        return "client:-"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"client:{host[:100]}"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return f"client:{address.ipv4_mapped}"
        return f"client:{ipaddress.IPv6Network((address, 64), strict=False)}"
    return f"client:{address}"


def _wait(seconds: float) -> int:
    return max(1, math.ceil(seconds))


@dataclass(slots=True)
class LoginAttempt:
    """A login counted as a failure until `succeeded` undoes it."""

    throttle: LoginThrottle
    subjects: list[str]

    def failed(self) -> None:
        metrics.login_failures.labels("password").inc()

    async def succeeded(self, conn: AsyncConnection) -> None:
        await repo.forget(conn, self.subjects)
        for subject in self.subjects:
            self.throttle.blocks.pop(subject, None)


class LoginThrottle:
    def __init__(self, db: Database, settings: Settings, secret: str = "") -> None:
        self.db = db
        self.backoff = Backoff(
            free=settings.login_free_attempts,
            base_s=settings.login_backoff_s,
            max_s=settings.login_backoff_max_s,
            window_s=settings.login_window_s,
        )
        self._key = hmac.new(secret.encode(), b"agentkb login throttle", hashlib.sha256).digest()
        self.blocks: dict[
            str, float
        ] = {}  # client subject -> end of its block (time.monotonic), as known here
        self._trusted: OrderedDict[bytes, float] = OrderedDict()  # credential digest -> when accepted

    def user_subject(self, username: str) -> str:
        return "user:" + hmac.new(self._key, username.encode(), hashlib.sha256).hexdigest()

    async def login_attempt(self, username: str, client: str | None) -> LoginAttempt:
        """Count a login attempt as a failure; TooManyRequests while the user name or the client is blocked
        (then nothing is counted and the password must not be compared)."""
        subjects = [self.user_subject(username), client_subject(client)]
        async with self.db.transaction() as conn:
            waits = await repo.blocked(conn, subjects)
            recorded = [] if waits else await repo.record_failures(conn, subjects, self.backoff)
            if not waits and len(recorded) < len(subjects):  # blocked by a concurrent attempt meanwhile
                waits = await repo.blocked(conn, subjects)
        if waits:
            if subjects[1] in waits:
                self._remember(subjects[1], waits[subjects[1]])
            metrics.login_throttled.labels("login").inc()
            wait = _wait(max(waits.values()))
            raise TooManyRequests(
                f"Too many failed logins for this user name or from this address: try again in {wait} s",
                retry_after_s=wait,
            )
        for row in recorded:
            if row.subject == subjects[1] and row.blocked_s is not None:
                self._remember(row.subject, row.blocked_s)
        return LoginAttempt(self, subjects)

    async def check_client(self, client: str | None) -> None:
        """TooManyRequests when the client address is blocked (read from the database): before a credential
        given on a public form (the console's API key field) is looked up."""
        subject = client_subject(client)
        async with self.db.read() as conn:
            waits = await repo.blocked(conn, [subject])
        if waits:
            self._remember(subject, waits[subject])
            metrics.login_throttled.labels("credential").inc()
            raise self.refusal(_wait(waits[subject]))

    def refused(self, client: str | None, credential: str) -> int | None:
        """Seconds to wait when a request with `credential` from `client` must be refused before the
        credential is looked up (its address is blocked, as this process knows, and this process has not
        accepted that credential lately); None to go on."""
        if not self.blocks:
            return None
        subject = client_subject(client)
        end = self.blocks.get(subject)
        if end is None:
            return None
        now = time.monotonic()
        if end <= now:
            del self.blocks[subject]
            return None
        accepted = self._trusted.get(_digest(credential))
        if accepted is not None and now - accepted < TRUSTED_FOR_S:
            return None
        metrics.login_throttled.labels("credential").inc()
        return _wait(end - now)

    def trust(self, credential: str) -> None:
        """Remember that `credential` was accepted (see `refused`)."""
        digest = _digest(credential)
        self._trusted[digest] = time.monotonic()
        self._trusted.move_to_end(digest)
        if len(self._trusted) > MAX_REMEMBERED:
            self._trusted.popitem(last=False)

    async def credential_failed(self, client: str | None) -> int | None:
        """Count an invalid credential against the client address. Seconds to wait when the address was
        blocked already (answer 429, not 401); None otherwise."""
        subject = client_subject(client)
        async with self.db.transaction() as conn:
            recorded = await repo.record_failures(conn, [subject], self.backoff)
            waits = {} if recorded else await repo.blocked(conn, [subject])
        metrics.login_failures.labels("credential").inc()
        if recorded and recorded[0].blocked_s is not None:
            self._remember(subject, recorded[0].blocked_s)
        if not waits:
            return None
        self._remember(subject, waits[subject])
        metrics.login_throttled.labels("credential").inc()
        return _wait(waits[subject])

    def refusal(self, wait: int) -> TooManyRequests:
        return TooManyRequests(
            f"Too many invalid credentials from this address: try again in {wait} s", retry_after_s=wait
        )

    def _remember(self, subject: str, seconds: float) -> None:
        now = time.monotonic()
        self.blocks[subject] = now + seconds
        if len(self.blocks) > MAX_REMEMBERED:  # drop the ended blocks, then the oldest
            for key in [k for k, end in self.blocks.items() if end <= now]:
                del self.blocks[key]
            while len(self.blocks) > MAX_REMEMBERED:
                del self.blocks[next(iter(self.blocks))]


def _digest(credential: str) -> bytes:
    return hashlib.sha256(credential.encode()).digest()
