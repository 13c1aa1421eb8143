"""Connections to the optional engines (`mssql`, `oracle`, `snowflake`, `bigquery`, `databricks`,
`clickhouse`) from MindsDB's parameter names for each (its handlers' `connection_args`), as SQLAlchemy URLs
for the dialect packages of the `warehouses` extra.

Each builder checks what it is given before anything connects: hosts go through the data-source policy
(`check_server_host`: no metadata addresses, no sockets), key files must be under the data-source
directory (`database_file`), and parameters that would make the server load a native library or lend its
own cloud credentials are refused. What MindsDB takes and agentkb does not is a 400 naming the parameter,
never silently ignored.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy.engine import URL

from agentkb.destinations import DataSourcePolicy
from agentkb.sql.source_params import (
    CONNECT_TIMEOUT_S,
    ConnectionSpec,
    Destinations,
    flag,
    identifier,
    invalid,
    mapping,
    port,
    refuse_present,
    required,
    text,
)

_HOSTNAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_ACCOUNT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_EASY_CONNECT = re.compile(
    r"^(?://)?(?P<host>[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(?::(?P<port>\d{1,5}))?(?:/(?P<svc>[A-Za-z0-9_.$#-]*))?$"
)
_ORACLE_AUTH = ("default", "sysdba", "sysoper", "sysasm", "sysbkp", "sysdgd", "syskmt", "sysrac", "prelim")
SNOWFLAKE_DOMAIN = "snowflakecomputing.com"


def _hostname(params: Mapping[str, Any], key: str) -> str:
    """A host name or address, as a server's; 400 for anything else (a URL, a path, several hosts)."""
    host = required(params, key)
    if not _HOSTNAME.match(host) and not re.fullmatch(r"\[?[0-9A-Fa-f:.]+\]?", host):
        raise invalid(f"parameter '{key}' must be a host name or address; got {host!r}")
    return host.strip("[]")


def _server(host: str, number: int, policy: DataSourcePolicy) -> tuple[str, int]:
    policy.check_server_host(host)
    return host, number


# --- Microsoft SQL Server (pymssql, as MindsDB's native connection) -------------------------------------


def mssql(params: Mapping[str, Any], policy: DataSourcePolicy) -> ConnectionSpec:
    refuse_present(
        params,
        ("server", "use_odbc", "driver", "connection_string_args"),
        "agentkb connects with pymssql to host and port (no named instances, no ODBC)",
    )
    host = _hostname(params, "host")
    number = port(params, 1433)
    identifier(params, "schema")  # MindsDB lists tables of this schema; names in queries say their own
    url = URL.create(
        "mssql+pymssql",
        username=required(params, "user"),
        password=text(params, "password"),
        host=host,
        port=number,
        database=required(params, "database"),
    )
    # pymssql's `timeout`: no query runs longer (pushdown's longest); shorter limits are the callers'
    args = {"login_timeout": CONNECT_TIMEOUT_S, "timeout": 300, "appname": "agentkb"}
    return ConnectionSpec(url, args, _server(host, number, policy), pin="host_port")


# --- Oracle (python-oracledb, thin mode) -----------------------------------------------------------------


def _oracle_target(params: Mapping[str, Any]) -> tuple[str, int, str | None, str | None]:
    """(host, port, sid, service name) from `dsn` (Easy Connect: host[:port][/service]) or the fields."""
    dsn = text(params, "dsn")
    if dsn is not None:
        found = _EASY_CONNECT.match(dsn.strip())
        if found is None:
            raise invalid(
                "parameter 'dsn' must be an Easy Connect string, host[:port][/service_name]: connect "
                "descriptors and tnsnames.ora aliases are not supported"
            )
        number = int(found["port"]) if found["port"] else 1521
        if not 0 < number < 65536:
            raise invalid(f"parameter 'dsn' names port {number}, not a TCP port")
        return found["host"].strip("[]"), number, None, found["svc"] or None
    host = _hostname(params, "host")
    sid, service = text(params, "sid"), text(params, "service_name")
    if sid is None and service is None:
        raise invalid("parameter 'sid' or 'service_name' is required (or 'dsn')")
    return host, port(params, 1521), sid, service


def oracle(params: Mapping[str, Any], policy: DataSourcePolicy) -> ConnectionSpec:
    if flag(params, "thick_mode") or text(params, "oracle_client_lib_dir") is not None:
        raise invalid(
            "parameters 'thick_mode' and 'oracle_client_lib_dir' are not supported: the thick mode loads "
            "a native client library from the server's disk; agentkb connects in thin mode"
        )
    host, number, sid, service = _oracle_target(params)
    args: dict[str, Any] = {"tcp_connect_timeout": float(CONNECT_TIMEOUT_S)}
    if params.get("disable_oob") is not None:
        args["disable_oob"] = flag(params, "disable_oob")
    mode = (text(params, "auth_mode") or "default").lower()
    if mode not in _ORACLE_AUTH:
        raise invalid(f"parameter 'auth_mode' must be one of {', '.join(_ORACLE_AUTH)}; got {mode!r}")
    if mode != "default":
        args["mode"] = getattr(importlib.import_module("oracledb"), f"AUTH_MODE_{mode.upper()}")
    url = URL.create(
        "oracle+oracledb",
        username=required(params, "user"),
        password=text(params, "password"),
        host=host,
        port=number,
        database=sid,
        query={"service_name": service} if service is not None else {},
    )
    return ConnectionSpec(url, args, _server(host, number, policy))


# --- Snowflake ---------------------------------------------------------------------------------------------


def snowflake_host(account: str) -> str:
    return f"{account}.{SNOWFLAKE_DOMAIN}"


def _snowflake_key(params: Mapping[str, Any], policy: DataSourcePolicy) -> dict[str, Any]:
    from cryptography.hazmat.primitives import serialization  # only Snowflake's key-pair logins need it

    passphrase = text(params, "private_key_passphrase")
    pem = text(params, "private_key")
    if pem is not None:
        try:
            key = serialization.load_pem_private_key(
                pem.replace("\\n", "\n").encode(), password=passphrase.encode() if passphrase else None
            )
        except (ValueError, TypeError):
            raise invalid(
                "parameter 'private_key' must be a PEM private key (and 'private_key_passphrase' its passphrase)"
            ) from None
        der = key.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return {"private_key": der}
    path = text(params, "private_key_path")
    if path is None:
        raise invalid("auth_type 'key_pair' needs 'private_key' or 'private_key_path'")
    args: dict[str, Any] = {"private_key_file": policy.database_file(path)}
    if passphrase is not None:
        args["private_key_file_pwd"] = passphrase
    return args


def snowflake(params: Mapping[str, Any], policy: DataSourcePolicy) -> ConnectionSpec:
    account = required(params, "account")
    if not _ACCOUNT.match(account):
        raise invalid(f"parameter 'account' must be a Snowflake account identifier; got {account!r}")
    auth = text(params, "auth_type") or "password"
    args: dict[str, Any] = {"login_timeout": CONNECT_TIMEOUT_S, "client_session_keep_alive": False}
    if auth == "password":
        password = required(params, "password")
    elif auth == "key_pair":
        password = None
        args.update(_snowflake_key(params, policy))
        args["authenticator"] = "SNOWFLAKE_JWT"
    else:
        raise invalid(f"parameter 'auth_type' must be 'password' or 'key_pair'; got {auth!r}")
    database = identifier(params, "database", required=True)
    schema = identifier(params, "schema", required=True)
    query = {k: v for k in ("warehouse", "role") if (v := identifier(params, k)) is not None}
    url = URL.create(
        "snowflake",
        username=required(params, "user"),
        password=password,
        host=account,
        database=f"{database}/{schema}",
        query=query,
    )
    return ConnectionSpec(url, args, _server(snowflake_host(account), 443, policy))


# --- BigQuery ----------------------------------------------------------------------------------------------


def bigquery(params: Mapping[str, Any], policy: DataSourcePolicy) -> ConnectionSpec:
    project = required(params, "project_id")
    dataset_project = text(params, "dataset_project") or project
    billing = text(params, "billing_project") or dataset_project
    if billing != dataset_project:
        raise invalid(
            "parameter 'billing_project' is not supported when it differs from the dataset's project: "
            "agentkb bills queries to the project that owns the dataset"
        )
    dataset = required(params, "dataset")
    args: dict[str, Any] = {}
    info = params.get("service_account_json")
    if isinstance(info, str) and info:
        info = mapping({"service_account_json": info}, "service_account_json")
    if isinstance(info, Mapping) and info:
        args["credentials_info"] = dict(info)
    elif info not in (None, ""):
        raise invalid("parameter 'service_account_json' must be the key file's JSON object")
    else:
        path = text(params, "service_account_keys")
        if path is None:
            raise invalid(
                "parameter 'service_account_json' or 'service_account_keys' is required: agentkb never lends "
                "its own environment's Google credentials to a data source"
            )
        if "://" in path:
            raise invalid("parameter 'service_account_keys' must be a file under the data-source directory")
        args["credentials_path"] = policy.database_file(path)
    # credentials are the dialect's arguments: without them it would take the server's own (ADC)
    return ConnectionSpec(URL.create("bigquery", host=dataset_project, database=dataset), engine_args=args)


# --- Databricks --------------------------------------------------------------------------------------------


def databricks(params: Mapping[str, Any], policy: DataSourcePolicy) -> ConnectionSpec:
    host = _hostname(params, "server_hostname")
    http_path = required(params, "http_path")
    if not re.fullmatch(r"/?[A-Za-z0-9/_.-]+", http_path):
        raise invalid(f"parameter 'http_path' must be the warehouse's HTTP path; got {http_path!r}")
    query = {"http_path": http_path}
    query.update({k: v for k in ("catalog", "schema") if (v := identifier(params, k)) is not None})
    args: dict[str, Any] = {}
    if (session := mapping(params, "session_configuration")) is not None:
        args["session_configuration"] = session
    if (headers := mapping(params, "http_headers")) is not None:
        args["http_headers"] = list(headers.items())
    url = URL.create(
        "databricks", username="token", password=required(params, "access_token"), host=host, query=query
    )
    return ConnectionSpec(url, args, _server(host, 443, policy))


# --- ClickHouse (clickhouse-sqlalchemy: the native protocol, HTTP or HTTPS, as MindsDB's handler) ----------


def clickhouse(params: Mapping[str, Any], policy: DataSourcePolicy) -> ConnectionSpec:
    protocol = (text(params, "protocol") or "native").lower()
    if protocol not in ("native", "http", "https"):
        raise invalid(f"parameter 'protocol' must be native, http or https; got {protocol!r}")
    host = _hostname(params, "host")
    number = port(params, {"native": 9000, "http": 8123, "https": 8443}[protocol])
    # ClickHouse settings: readonly=2 refuses every write (and still lets the driver set its settings)
    query = {"readonly": "2", "max_execution_time": "300", "connect_timeout": str(CONNECT_TIMEOUT_S)}
    if protocol == "https":
        query["protocol"] = "https"
        if not flag(params, "verify", default=True):
            query["verify"] = "false"
    url = URL.create(
        "clickhouse+native" if protocol == "native" else "clickhouse+http",
        username=required(params, "user"),
        password=text(params, "password"),
        host=host,
        port=number,
        database=required(params, "database"),
        query=query,
    )
    return ConnectionSpec(url, {}, _server(host, number, policy))  # the driver takes the URL whole: no pin


Builder = Callable[[Mapping[str, Any], DataSourcePolicy], ConnectionSpec]
BUILDERS: dict[str, Builder] = {
    "mssql": mssql,
    "oracle": oracle,
    "snowflake": snowflake,
    "bigquery": bigquery,
    "databricks": databricks,
    "clickhouse": clickhouse,
}


def destinations(family: str, params: Mapping[str, Any]) -> Destinations:
    """The hosts and files a family's parameters name, as given (checked before they are stored)."""

    def given(key: str) -> tuple[str, ...]:
        value = params.get(key)
        return (value,) if isinstance(value, str) and value else ()

    if family == "snowflake":
        account = params.get("account")
        ok = isinstance(account, str) and _ACCOUNT.match(account) is not None
        return Destinations((snowflake_host(str(account)),) if ok else (), given("private_key_path"))
    if family == "bigquery":
        return Destinations((), given("service_account_keys"))
    if family == "databricks":
        return Destinations(given("server_hostname"))
    if family == "oracle" and (dsn := params.get("dsn")) and isinstance(dsn, str):
        found = _EASY_CONNECT.match(dsn.strip())
        return Destinations((found["host"].strip("[]"),) if found else ())
    return Destinations(given("host"))
