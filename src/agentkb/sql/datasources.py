"""Connections to external data sources, from MindsDB-style `parameters`.

Engines (`engines.ENGINES`): PostgreSQL's protocol (`postgres`, `timescaledb`, `redshift`; psycopg 3),
`mysql`/`mariadb` (PyMySQL), `sqlite` (opened read-only, and each connection sandboxed: no extensions,
attached databases or file functions; `sandbox.guard_sqlite`), `duckdb` (`duckdb_source`: read-only, external
access off, configuration locked), and the optional warehouses (`warehouses`: `mssql`, `oracle`, `snowflake`,
`bigquery`, `databricks`, `clickhouse`), whose SQLAlchemy dialects are imported only when used (400 naming
the package when missing). Every engine is a SQLAlchemy *sync* engine: queries run in worker threads, never
on the event loop.
What an engine may reach is `destinations.DataSourcePolicy`'s to say: the parameters are checked before an
engine is built (unix sockets, metadata hosts, agentkb's own data directory, files outside the data-source
directory), and every new connection to a server is checked again against what its host resolves to at that
moment, then pinned to those addresses where the driver allows it (libpq's `hostaddr`; PyMySQL's host,
unless TLS verifies the name; pymssql's and clickhouse-driver's host); the HTTPS warehouses (Snowflake,
Databricks) resolve the name themselves after the check.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
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
from agentkb.sql import duckdb_source, sandbox, warehouses
from agentkb.sql.engines import SUPPORTED_ENGINES, check_engine, dialect_of, kind_of
from agentkb.sql.source_params import (
    CONNECT_TIMEOUT_S,
    ConnectionSpec,
    Destinations,
    identifier,
    invalid,
    port,
    require_module,
    required,
)
from agentkb.sql.source_params import text as param_text

__all__ = [
    "SUPPORTED_ENGINES",
    "ConnectionSpec",
    "EngineCache",
    "check_destination",
    "check_engine",
    "check_installed",
    "connection_spec",
    "create",
    "dialect_of",
    "error_message",
    "test_connection",
]

_DEFAULT_PORTS = {"postgres": 5432, "redshift": 5439, "mysql": 3306}
_SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


def _sqlite(params: Mapping[str, Any], policy: DataSourcePolicy) -> ConnectionSpec:
    path = param_text(params, "db_file") or required(params, "database")
    uri = Path(policy.database_file(path)).as_uri()  # percent-encodes odd characters
    return ConnectionSpec(URL.create("sqlite+pysqlite", database=uri, query={"mode": "ro", "uri": "true"}))


def _server_fields(params: Mapping[str, Any], default_port: int) -> dict[str, Any]:
    return {
        "username": required(params, "user"),
        "password": param_text(params, "password"),
        "host": required(params, "host"),
        "port": port(params, default_port),
        "database": required(params, "database"),
    }


def _postgres(engine: str, params: Mapping[str, Any], policy: DataSourcePolicy) -> ConnectionSpec:
    common = _server_fields(params, _DEFAULT_PORTS.get(engine, 5432))
    policy.check_server_host(common["host"])
    args: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "agentkb"}
    schema = identifier(params, "schema")
    if schema is not None:
        args["options"] = f"-c search_path={schema},public"
    sslmode = param_text(params, "sslmode")
    if sslmode is not None:
        if sslmode not in _SSLMODES:
            raise invalid(f"parameter 'sslmode' must be one of {', '.join(_SSLMODES)}")
        args["sslmode"] = sslmode
    return ConnectionSpec(URL.create("postgresql+psycopg", **common), args, _tcp(common), pin="hostaddr")


def _mysql(params: Mapping[str, Any], policy: DataSourcePolicy) -> ConnectionSpec:
    common = _server_fields(params, _DEFAULT_PORTS["mysql"])
    policy.check_server_host(common["host"])
    args: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S}
    ssl = {k: v for k in ("ca", "cert", "key") if (v := param_text(params, f"ssl_{k}")) is not None}
    if ssl or params.get("ssl") is True:
        args["ssl"] = ssl or {"check_hostname": False}
    url = URL.create("mysql+pymysql", query={"charset": "utf8mb4"}, **common)
    # a verified certificate names the host: dial the name then (it was checked all the same)
    return ConnectionSpec(url, args, _tcp(common), pin=None if ssl else "host")


def _tcp(common: Mapping[str, Any]) -> tuple[str, int] | None:
    host = str(common["host"])
    return None if host.startswith(("/", "@")) else (host, int(common["port"]))  # a socket the policy allowed


def check_installed(engine: str) -> None:
    """400 "Engine not installed" naming the package (and agentkb's extra) when the engine's SQLAlchemy
    dialect is missing."""
    kind = kind_of(engine)
    if kind.module is not None and kind.package is not None:
        extra = engine.lower() if kind.family in warehouses.BUILDERS else None  # pyproject's extras
        require_module(kind.module, kind.package, engine.lower(), extra)


def connection_spec(engine: str, params: Mapping[str, Any], policy: DataSourcePolicy) -> ConnectionSpec:
    """The SQLAlchemy URL (built with `URL.create`, never by concatenation) and driver arguments; 400 when
    `policy` refuses the host (no lookup here) or the file, when a parameter is malformed, or when the
    engine's package is not installed."""
    check_installed(engine)
    kind = kind_of(engine)
    if kind.family == "sqlite":
        return _sqlite(params, policy)
    if kind.family == "duckdb":
        return duckdb_source.connection_spec(params, policy)
    if kind.family == "postgres":
        return _postgres(engine.lower(), params, policy)
    if kind.family == "mysql":
        return _mysql(params, policy)
    return warehouses.BUILDERS[kind.family](params, policy)


def _destinations(engine: str, params: Mapping[str, Any]) -> Destinations:
    family = kind_of(engine).family
    if family == "sqlite":
        key = "db_file" if params.get("db_file") else "database"
        value = params.get(key)
        return Destinations(files=(value,) if isinstance(value, str) and value else ())
    if family == "duckdb":
        return duckdb_source.destinations(params)
    return warehouses.destinations(family, params)


def check_destination(engine: str, params: Mapping[str, Any], policy: DataSourcePolicy) -> None:
    """What `policy` says of the parameters as given, before they are stored (even unchecked, as MindsDB
    stores them): the files of a file database or a key, the hosts of a server (no lookup). Malformed
    parameters are left to `connection_spec`."""
    found = _destinations(engine, params)
    for host in found.hosts:
        policy.check_server_host(host)
    for path in found.files:
        policy.database_file(path)


def _guard(sa_engine: Engine, spec: ConnectionSpec, policy: DataSourcePolicy) -> Engine:
    """Check every new connection's server against `policy` as its host resolves now, and dial the checked
    address where the driver takes one (SQLAlchemy's `do_connect` event, which may change the driver's
    arguments)."""
    if spec.server is None:  # a file (checked when the spec was built), or a socket `policy` allowed
        return sa_engine
    host, port_number = spec.server

    @event.listens_for(sa_engine, "do_connect")
    def check(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        try:
            address = policy.server_addresses(host, port_number)[0]
        except OSError:
            return  # the name does not resolve: the driver's own error says so
        if spec.pin == "hostaddr":
            cparams["hostaddr"] = str(
                address
            )  # libpq dials it; `host` still names the server (TLS, passfile)
        elif spec.pin == "host":
            cparams["host"] = str(address)
        elif spec.pin == "host_port" and address.version == 4:  # pymssql's `host:port`
            cparams["host"] = f"{address}:{port_number}"

    return sa_engine


def create(
    engine: str, params: Mapping[str, Any], policy: DataSourcePolicy, *, pooled: bool = True
) -> Engine:
    """A new engine: small pool, pre-ping; `pooled=False` for one-off use (NullPool). Its execution options
    carry `agentkb_dialect`, the engine's pushdown dialect (`pushdown` opens its read-only transaction by it)."""
    spec = connection_spec(engine, params, policy)
    pool: dict[str, Any] = {"poolclass": NullPool}
    if pooled:
        pool = {
            "pool_size": 2,
            "max_overflow": 3,
            "pool_timeout": 30,
            "pool_recycle": 1800,
            "pool_pre_ping": True,
        }
    try:
        sa_engine = create_engine(spec.url, connect_args=spec.connect_args, **spec.engine_args, **pool)
    except Exception as exc:  # noqa: BLE001 - a dialect that checks its arguments up front (BigQuery's key)
        raise BadRequest(error_message(exc, params), title="Connection error") from None
    sa_engine.update_execution_options(agentkb_dialect=dialect_of(engine))
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
            conn.execute(text("SELECT 1 FROM dual" if sa_engine.dialect.name == "oracle" else "SELECT 1"))
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
