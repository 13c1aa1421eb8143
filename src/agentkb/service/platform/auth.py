"""Authentication: who may call the HTTP API.

Two kinds of credential, both checked against PostgreSQL on every request (so every API process sharing the
database agrees at once, and a revoked key or ended session is refused on its next request):

- **login tokens**: `POST /api/login` with `AGENTKB_USERNAME` / `AGENTKB_PASSWORD` gives a random token that
  expires after `AGENTKB_TOKEN_TTL_S`; its row also holds an HMAC of the login keyed by the token, so
  changing the password (or user name) ends every session made with the old one;
- **API keys**: `agentkb keys create NAME` makes a random `akb_…` key, shown once. A key may be scoped:
  `--read-only` (no writes) and `--project P` (only those projects); `access` enforces the scope;
- **key sessions**: the web console signed in with an API key holds a session token of its own (same table,
  same lifetime as a login token, tagged by the key's hash), so that logging out leaves nothing usable; it has
  its key's scope.

Failed logins and invalid credentials are throttled per user name and client address
(`login_throttle`). Only SHA-256 hashes of the secrets are stored. Auth is on when a login is
configured or any API key exists, and also on a server reachable from the network unless `allow_no_auth` says
otherwise (so revoking the last key of an exposed server does not open it): one whose settings name a
non-loopback host, or that is found listening on (`observe`: the sockets the server bound) or reached at a
non-loopback address.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.errors import BadRequest, Conflict, NotFound, Unauthorized, project_not_found
from agentkb.service.platform import access
from agentkb.service.platform.access import Principal
from agentkb.service.platform.login_throttle import LoginThrottle
from agentkb.settings import Settings
from agentkb.storage import auth as repo
from agentkb.storage import projects as project_rows
from agentkb.storage.auth import ApiKeyRow
from agentkb.storage.db import Database
from agentkb.validation import is_identifier

KEY_PREFIX = "akb_"
KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_CREDENTIAL = 512  # longer is no credential of ours: refused without a database round trip
TOUCH_AFTER_S = 60.0  # an API key's `last_used_at` is recorded at most once a minute
KEYS_RECHECK_S = 1.0  # how long "no API key exists" (auth off) is trusted before asking again


@dataclass(frozen=True, slots=True)
class LoginToken:
    token: str
    expires_in_s: float


@functools.lru_cache(maxsize=256)
def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False  # a host name: it may resolve to any interface
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback  # ::ffff:127.0.0.1, a dual-stack socket's view of 127.0.0.1
    return address.is_loopback


def is_local(address: str) -> bool:
    """Whether a socket's address (an IP, or a unix socket's path) is reachable from this machine only."""
    return is_loopback(address) or address.startswith("/") or address.startswith("\0") or not address


def _sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _login_tag(token: str, username: str, password: str) -> str:
    return hmac.new(token.encode(), f"{username}\0{password}".encode(), hashlib.sha256).hexdigest()


def _key_tag(token: str, key_hash: str) -> str:
    """A key session's tag: an HMAC, keyed by the session token, of the API key's hash (never a login's)."""
    return hmac.new(token.encode(), f"api-key\0{key_hash}".encode(), hashlib.sha256).hexdigest()


def _same(given: str, expected: str) -> bool:
    """Constant-time equality; comparing digests keeps even the lengths from showing in the timing."""
    return hmac.compare_digest(
        hashlib.sha256(given.encode()).digest(), hashlib.sha256(expected.encode()).digest()
    )


def _principal(key: repo.KeyScope) -> Principal:
    """The principal of an API key, with its scope (project names compared in lower case)."""
    projects = frozenset(p.lower() for p in key.projects) if key.projects is not None else None
    return Principal("key", key.name, key.read_only, projects)


class AuthService:
    def __init__(self, db: Database, settings: Settings, throttle: LoginThrottle | None = None) -> None:
        self.db = db
        self.throttle = throttle or LoginThrottle(db, settings)  # failed logins and credentials
        self.username = settings.username
        self._password = settings.password.get_secret_value() if settings.password is not None else None
        self.token_ttl_s = settings.token_ttl_s
        self.host = settings.host
        self.allow_no_auth = settings.allow_no_auth
        # an exposed server never runs open by accident, even after its last API key is revoked
        self.always_on = not settings.allow_no_auth and not is_loopback(settings.host)
        self._any_key: tuple[bool, float] | None = None  # (a key exists, when that was read)

    @property
    def login_enabled(self) -> bool:
        return self.username is not None and self._password is not None

    async def any_key(self) -> bool:
        """Whether an API key exists, read at most once per `KEYS_RECHECK_S` (so that a server with auth off
        costs no database round trip per request): a first key created elsewhere (`agentkb keys create`)
        turns auth on within that time. Key *validity* is never cached: a revoke takes effect at once."""
        now = time.monotonic()
        if self._any_key is None or now - self._any_key[1] > KEYS_RECHECK_S:
            async with self.db.read() as conn:
                self._any_key = (await repo.any_key(conn), now)
        return self._any_key[0]

    async def configured(self) -> bool:
        """A login is configured or an API key exists."""
        return self.login_enabled or await self.any_key()

    async def enabled(self) -> bool:
        """Whether requests need a credential."""
        return self.always_on or await self.configured()

    def observe(self, address: str | None) -> None:
        """An address the server listens on, or a request arrived at (the ASGI scope's `server`): one that is
        not loopback (nor a unix socket) means the server is reachable from the network, so authentication
        stays on from then on (unless `allow_no_auth`), whatever `host` the settings name."""
        if address is None or self.always_on or self.allow_no_auth or is_local(address):
            return
        self.always_on = True

    async def exposure_problem(self) -> str | None:
        """Why `agentkb serve` must not start on its host with auth off; None when it may."""
        if self.allow_no_auth or is_loopback(self.host) or await self.configured():
            return None
        return (
            f"refusing to serve on {self.host} with authentication off: anyone who reaches the port could "
            "use the API. Turn authentication on: set AGENTKB_USERNAME and AGENTKB_PASSWORD, or create an "
            "API key with `agentkb keys create NAME` (on the same data directory or AGENTKB_DATABASE_URL). "
            "Or pass --allow-no-auth (AGENTKB_ALLOW_NO_AUTH=true) to serve without authentication on purpose."
        )

    async def authenticate(self, credential: str | None) -> Principal | None:
        """The principal a credential (login token or API key) stands for; None if it is not valid now."""
        if not credential or len(credential) > MAX_CREDENTIAL:
            return None
        digest = _sha256(credential)
        if credential.startswith(KEY_PREFIX):
            async with self.db.transaction() as conn:
                found = await repo.use_key(conn, digest, TOUCH_AFTER_S)
            if found is None or not _same(found.key_hash, digest):
                return None
            return _principal(found)
        async with self.db.read() as conn:
            session = await repo.get_session(conn, digest)
            if session is None:
                return None
            if (
                self.username is not None
                and self._password is not None
                and _same(session.login_tag, _login_tag(credential, self.username, self._password))
            ):
                return Principal("user", session.username)
            key = await repo.key_by_name(conn, session.username)
        # else a session opened with an API key (`key_session`); it ends with the key, and has its scope
        if key is None or not _same(session.login_tag, _key_tag(credential, key.key_hash)):
            return None  # made with another user name, password or key
        return _principal(key)

    async def login(self, username: object, password: object, client: str | None = None) -> LoginToken:
        """A login token for the configured user; `client` (the caller's address) and the user name count the
        failures of the login throttle, which refuses (429) before comparing anything while either is
        blocked."""
        if self.username is None or self._password is None:
            raise Unauthorized(
                "Login is not configured on this server (set AGENTKB_USERNAME and AGENTKB_PASSWORD); "
                "authenticate with an API key instead"
            )
        given_user = username if isinstance(username, str) else ""
        given_password = password if isinstance(password, str) else ""
        attempt = await self.throttle.login_attempt(given_user, client)
        user_ok = _same(given_user, self.username)
        password_ok = _same(given_password, self._password)  # both compared, whatever the first said
        if not (user_ok and password_ok):
            attempt.failed()
            raise Unauthorized("Invalid username or password")
        token = secrets.token_urlsafe(32)
        async with self.db.transaction() as conn:
            await repo.delete_expired_sessions(conn)
            await repo.insert_session(
                conn,
                _sha256(token),
                self.username,
                _login_tag(token, self.username, self._password),
                self.token_ttl_s,
            )
            await attempt.succeeded(conn)
        return LoginToken(token, self.token_ttl_s)

    async def key_session(self, key: str) -> LoginToken:
        """A session token standing for an API key, for as long as a login token lasts: what the web console
        keeps in its cookie instead of the key itself, so that logging out (which deletes the session) leaves
        nothing usable behind. Revoking the key ends it too (its tag is keyed by the key's hash)."""
        found = await self.authenticate(key) if key.startswith(KEY_PREFIX) else None
        if found is None or found.kind != "key":
            raise Unauthorized("The API key is invalid or revoked")
        token = secrets.token_urlsafe(32)
        async with self.db.transaction() as conn:
            await repo.delete_expired_sessions(conn)
            await repo.insert_session(
                conn, _sha256(token), found.name, _key_tag(token, _sha256(key)), self.token_ttl_s
            )
        return LoginToken(token, self.token_ttl_s)

    async def logout(self, credential: str | None) -> bool:
        """End the session of a login token; False for anything else (an API key is revoked, not ended)."""
        if not credential or credential.startswith(KEY_PREFIX) or len(credential) > MAX_CREDENTIAL:
            return False
        async with self.db.transaction() as conn:
            return await repo.delete_session(conn, _sha256(credential))

    async def create_key(
        self, name: str, *, read_only: bool = False, projects: Sequence[str] | None = None
    ) -> str:
        """A new API key named `name`; the key itself is returned once and stored only as its hash.
        `read_only`: it may not write; `projects`: the only (existing) projects it may use."""
        access.require_write("creating an API key")
        access.require_global("creating an API key")
        if not KEY_NAME.match(name):
            raise BadRequest(
                "an API key name is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or "
                f"digit; got {name!r}",
                title="Invalid name",
            )
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        async with self.db.transaction() as conn:
            scope = await _key_projects(conn, projects) if projects is not None else None
            created = await repo.insert_key(conn, name, _sha256(key), read_only=read_only, projects=scope)
        if created is None:
            raise Conflict(f"An API key named {name} already exists", title="API key already exists")
        return key

    async def list_keys(self) -> list[ApiKeyRow]:
        access.require_global("listing API keys")
        async with self.db.read() as conn:
            return await repo.list_keys(conn)

    async def revoke_key(self, name: str) -> None:
        access.require_write("revoking an API key")
        access.require_global("revoking an API key")
        async with self.db.transaction() as conn:
            deleted = await repo.delete_key(conn, name)
        if not deleted:
            raise NotFound(f"No API key named {name}", title="API key not found")


async def _key_projects(conn: AsyncConnection, names: Sequence[str]) -> list[str]:
    """The projects a key is limited to, as stored: each an existing project, spelt as it is stored."""
    if not names:
        raise BadRequest("a project-scoped API key needs at least one project", title="Invalid scope")
    found: dict[str, str] = {}
    for name in names:
        project = await project_rows.get(conn, name) if is_identifier(name) else None
        if project is None:
            raise project_not_found(name)
        found[project.name.lower()] = project.name
    return sorted(found.values())
