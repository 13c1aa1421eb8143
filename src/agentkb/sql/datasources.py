"""Connections to external data sources, from MindsDB-style `parameters`.

Engines: `postgres`/`postgresql` (psycopg 3), `mysql`/`mariadb` (PyMySQL), `sqlite` (opened read-only, and
each connection sandboxed: no extensions, attached databases or file functions; `sandbox.guard_sqlite`).
Every engine is a SQLAlchemy *sync* engine: queries run in worker threads, never on the event loop.
What an engine may reach is `destinations.DataSourcePolicy`'s to say: the parameters are checked before an
engine is built (unix sockets, agentkb's own data directory, files outside the data-source directory), and
every new connection to a server is checked again against what its host resolves to at that moment, then
pinned to those addresses (libpq's `hostaddr`; PyMySQL's host, unless TLS verifies the name).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from agentkb.destinations import DataSourcePolicy
from agentkb.errors import BadRequest
from agentkb.secrecy import mask_text, secret_values
from agentkb.sql import sandbox

SUPPORTED_ENGINES = ("postgres", "postgresql", "mysql", "mariadb", "sqlite")
_DIALECTS = {
    "postgres": "postgres",
    "postgresql": "postgres",
    "mysql": "mysql",
    "mariadb": "mysql",
    "sqlite": "sqlite",
}
_DEFAULT_PORTS = {"postgres": 5432, "mysql": 3306}
CONNECT_TIMEOUT_S = 10
_SCHEMA = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
_SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


def check_engine(engine: object) -> str:
    """The engine name, lower-cased; 400 listing the supported ones otherwise."""
    if not isinstance(engine, str) or engine.lower() not in SUPPORTED_ENGINES:
        raise BadRequest(
            f"Unsupported engine {engine!r}; supported engines: {', '.join(SUPPORTED_ENGINES)}",
            title="Invalid engine",
        )
    return engine.lower()


def dialect_of(engine: str) -> str:
    """The SQL dialect pushdown renders for an engine: `postgres`, `mysql` or `sqlite`."""
    return _DIALECTS[check_engine(engine)]


def _invalid(detail: str) -> BadRequest:
    return BadRequest(detail, title="Invalid parameters")


def _text(params: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = params.get(key)
    if value is None or value == "":
        if required:
            raise _invalid(f"parameter '{key}' is required")
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise _invalid(f"parameter '{key}' must be a string")
    return str(value)


def _port(params: Mapping[str, Any], default: int) -> int:
    value = params.get("port")
    if value is None or value == "":
        return default
    try:
        port = int(value)
    except (TypeError, ValueError):
        port = 0
    if isinstance(value, bool) or not 0 < port < 65536:
        raise _invalid(f"parameter 'port' must be a TCP port number; got {value!r}")
    return port


@dataclass(frozen=True, slots=True)
class ConnectionSpec:
    url: URL
    connect_args: dict[str, Any] = field(default_factory=dict)
    pin_host: bool = False  # whether a connection may dial the checked address in place of the host name


def connection_spec(engine: str, params: Mapping[str, Any], policy: DataSourcePolicy) -> ConnectionSpec:
    """The SQLAlchemy URL (built with `URL.create`, never by concatenation) and driver arguments; 400 when
    `policy` refuses the host (no lookup here) or the file."""
    dialect = dialect_of(engine)
    if dialect == "sqlite":
        path = _text(params, "db_file") or _text(params, "database", required=True)
        assert path is not None
        uri = Path(policy.database_file(path)).as_uri()  # percent-encodes odd characters
        return ConnectionSpec(
            URL.create("sqlite+pysqlite", database=uri, query={"mode": "ro", "uri": "true"})
        )
    common: dict[str, Any] = {
        "username": _text(params, "user", required=True),
        "password": _text(params, "password"),
        "host": _text(params, "host", required=True),
        "port": _port(params, _DEFAULT_PORTS[dialect]),
        "database": _text(params, "database", required=True),
    }
    policy.check_server_host(common["host"])
    if dialect == "postgres":
        args: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "agentkb"}
        schema = _text(params, "schema")
        if schema is not None:
            if not _SCHEMA.match(schema):
                raise _invalid(f"parameter 'schema' must be a plain identifier; got {schema!r}")
            args["options"] = f"-c search_path={schema},public"
        sslmode = _text(params, "sslmode")
        if sslmode is not None:
            if sslmode not in _SSLMODES:
                raise _invalid(f"parameter 'sslmode' must be one of {', '.join(_SSLMODES)}")
            args["sslmode"] = sslmode
        return ConnectionSpec(URL.create("postgresql+psycopg", **common), args, pin_host=True)
    args = {"connect_timeout": CONNECT_TIMEOUT_S}
    ssl = {k: v for k in ("ca", "cert", "key") if (v := _text(params, f"ssl_{k}")) is not None}
    if ssl or params.get("ssl") is True:
        args["ssl"] = ssl or {"check_hostname": False}
    url = URL.create("mysql+pymysql", query={"charset": "utf8mb4"}, **common)
    return ConnectionSpec(url, args, pin_host=not ssl)  # a verified certificate names the host


def check_destination(engine: str, params: Mapping[str, Any], policy: DataSourcePolicy) -> None:
    """What `policy` says of the parameters as given, before they are stored (even unchecked, as MindsDB
    stores them): the file of a file database, the host of a server (no lookup). Malformed parameters are
    left to `connection_spec`."""
    key = "host"
    if dialect_of(engine) == "sqlite":
        key = "db_file" if params.get("db_file") else "database"
    value = params.get(key)
    if isinstance(value, str) and value:
        if key == "host":
            policy.check_server_host(value)
        else:
            policy.database_file(value)


def _guard(sa_engine: Engine, spec: ConnectionSpec, policy: DataSourcePolicy) -> Engine:
    """Check every new connection's server against `policy` as its host resolves now, and dial the checked
    address (SQLAlchemy's `do_connect` event, which may change the driver's arguments)."""
    host, port = spec.url.host, spec.url.port
    if host is None or port is None or host.startswith(("/", "@")):  # a file, or a socket `policy` allowed
        return sa_engine

    @event.listens_for(sa_engine, "do_connect")
    def check(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        try:
            address = str(policy.server_addresses(host, port)[0])
        except OSError:
            return  # the name does not resolve: the driver's own error says so
        if spec.pin_host and spec.url.get_backend_name() == "postgresql":
            cparams["hostaddr"] = address  # libpq dials it; `host` still names the server (TLS, passfile)
        elif spec.pin_host:
            cparams["host"] = address

    return sa_engine


def create(
    engine: str, params: Mapping[str, Any], policy: DataSourcePolicy, *, pooled: bool = True
) -> Engine:
    """A new engine: small pool, pre-ping; `pooled=False` for one-off use (NullPool)."""
    spec = connection_spec(engine, params, policy)
    if not pooled:
        sa_engine = create_engine(spec.url, connect_args=spec.connect_args, poolclass=NullPool)
        return _guard(_sandboxed(sa_engine), spec, policy)
    sa_engine = create_engine(
        spec.url,
        connect_args=spec.connect_args,
        pool_size=2,
        max_overflow=3,
        pool_timeout=30,
        pool_recycle=1800,
        pool_pre_ping=True,
    )
    return _guard(_sandboxed(sa_engine), spec, policy)


def _guard_sqlite(dbapi_connection: Any, _record: Any) -> None:
    sandbox.guard_sqlite(dbapi_connection)


def _sandboxed(engine: Engine) -> Engine:
    """A SQLite engine whose every connection is sandboxed; other engines as they are."""
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _guard_sqlite)
    return engine


def error_message(exc: BaseException, params: Mapping[str, Any]) -> str:
    """The driver's message, with the password and any other secret (if echoed anywhere) masked."""
    orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    message = " ".join(str(orig).split()) or type(orig).__name__
    return mask_text(message, secret_values(params))[:1000]


def test_connection(engine: str, params: Mapping[str, Any], policy: DataSourcePolicy) -> None:
    """Connect and run `SELECT 1` (10 s connect timeout). 400 "Connection error" if that fails; the
    policy's own 400 when it refuses the destination."""
    sa_engine = create(engine, params, policy, pooled=False)
    try:
        with sa_engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except BadRequest:
        raise
    except Exception as exc:  # noqa: BLE001 - any driver failure is the client's connection problem
        raise BadRequest(error_message(exc, params), title="Connection error") from None
    finally:
        sa_engine.dispose()


test_connection.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


class EngineCache:
    """One pooled engine per data source; a source re-created with other parameters gets a new one."""

    def __init__(self, policy: DataSourcePolicy) -> None:
        self.policy = policy
        self._lock = threading.Lock()
        self._engines: dict[str, tuple[bytes, Engine]] = {}

    def get(self, name: str, engine: str, params: Mapping[str, Any]) -> Engine:
        key = orjson.dumps([engine, params], option=orjson.OPT_SORT_KEYS)
        with self._lock:
            cached = self._engines.get(name)
            if cached is not None and cached[0] == key:
                return cached[1]
            sa_engine = create(engine, params, self.policy)
            self._engines[name] = (key, sa_engine)
        if cached is not None:
            cached[1].dispose()
        return sa_engine

    def discard(self, name: str) -> None:
        with self._lock:
            cached = self._engines.pop(name, None)
        if cached is not None:
            cached[1].dispose()

    def dispose_all(self) -> None:
        with self._lock:
            engines = [e for _, e in self._engines.values()]
            self._engines.clear()
        for sa_engine in engines:
            sa_engine.dispose()
