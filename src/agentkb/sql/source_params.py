"""MindsDB-style connection parameters, read and checked, and what a data source's connection is built from.

Every engine's builder (`datasources`, `warehouses`, `duckdb_source`) reads its parameters through these
helpers, so a malformed value is the same 400 "Invalid parameters" whatever the engine, and returns a
`ConnectionSpec`: the SQLAlchemy URL (made with `URL.create`, never by concatenation), the driver's
arguments, and where it connects (`server`, checked again on every new connection) — what the data-source
policy needs to know of it.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from sqlalchemy.engine import URL

from agentkb.errors import BadRequest

CONNECT_TIMEOUT_S = 10
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")

Pin = Literal["hostaddr", "host", "host_port"]
"""How a connection dials the address the policy checked in place of the host name: libpq's `hostaddr`
(the host still names the server for TLS), the driver's `host`, or pymssql's `host` as `address:port`."""


@dataclass(frozen=True, slots=True)
class ConnectionSpec:
    url: URL
    connect_args: dict[str, Any] = field(default_factory=dict)
    # (host, port) every new connection dials, checked against the policy as it resolves then; None for a
    # file (the path was checked when the spec was built)
    server: tuple[str, int] | None = None
    pin: Pin | None = None  # None: the driver resolves the name itself (checked, not pinned)
    engine_args: dict[str, Any] = field(default_factory=dict)  # the dialect's own (BigQuery's credentials)


@dataclass(frozen=True, slots=True)
class Destinations:
    """What a set of parameters names, before any lookup: server hosts and database (or key) files."""

    hosts: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


def invalid(detail: str) -> BadRequest:
    return BadRequest(detail, title="Invalid parameters")


def text(params: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    """A string parameter (a number is taken as its text); None when absent or empty."""
    value = params.get(key)
    if value is None or value == "":
        if required:
            raise invalid(f"parameter '{key}' is required")
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise invalid(f"parameter '{key}' must be a string")
    return str(value)


def required(params: Mapping[str, Any], key: str) -> str:
    value = text(params, key, required=True)
    assert value is not None
    return value


def port(params: Mapping[str, Any], default: int) -> int:
    value = params.get("port")
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if isinstance(value, bool) or not 0 < number < 65536:
        raise invalid(f"parameter 'port' must be a TCP port number; got {value!r}")
    return number


def flag(params: Mapping[str, Any], key: str, default: bool = False) -> bool:
    """A boolean parameter: true/false, or their usual spellings as text (`"true"`, `"0"`, ...)."""
    value = params.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    raise invalid(f"parameter '{key}' must be true or false; got {value!r}")


def identifier(params: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    """A plain identifier (a schema, a warehouse): letters, digits, `_` and `$`."""
    value = text(params, key, required=required)
    if value is not None and not _IDENTIFIER.match(value):
        raise invalid(f"parameter '{key}' must be a plain identifier; got {value!r}")
    return value


def mapping(params: Mapping[str, Any], key: str) -> dict[str, str] | None:
    """A parameter holding string pairs: an object, or the same as JSON text (MindsDB takes both)."""
    value = params.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise invalid(f"parameter '{key}' must be an object (or its JSON text)") from None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise invalid(f"parameter '{key}' must be an object (or its JSON text)")
    if not all(isinstance(v, str | int | float | bool) for v in value.values()):
        raise invalid(f"parameter '{key}' must map names to plain values")
    return {k: str(v) for k, v in value.items()}


def refuse_present(params: Mapping[str, Any], keys: tuple[str, ...], why: str) -> None:
    """400 when one of `keys` is given: parameters MindsDB takes that agentkb does not, said out loud rather
    than ignored."""
    for key in keys:
        if params.get(key) not in (None, "", False):
            raise invalid(f"parameter '{key}' is not supported: {why}")


def require_module(module: str, package: str, engine: str, extra: str | None = None) -> None:
    """400 naming the package to install when the engine's SQLAlchemy dialect (or driver) is missing."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        also = f" (or pip install 'agentkb[{extra}]')" if extra else ""
        raise BadRequest(
            f"Engine {engine!r} needs the Python package {package!r}, which is not installed: "
            f"pip install {package}{also}",
            title="Engine not installed",
        )
