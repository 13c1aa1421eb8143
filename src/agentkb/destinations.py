"""Where the server may connect on a user's behalf: the one place that decides.

Three kinds of destination come from users: model servers (embedding, reranking and agent LLM `base_url`s),
external databases (data sources) and web pages (the crawler). For all of them a **link-local or cloud
metadata address is never a destination** (169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200 and the
metadata host names): that is where a cloud instance hands out its credentials. Beyond that:

- model servers may be loopback or private (a local Ollama or vLLM is the normal case);
- the crawler refuses every non-public address unless `AGENTKB_CRAWL_ALLOW_PRIVATE` (`refusal`);
- data sources (`DataSourcePolicy`) may not be a unix socket, agentkb's own PostgreSQL server or a file
  database outside `AGENTKB_DATA_SOURCE_FILE_DIR` (nor in agentkb's data directory), unless
  `AGENTKB_DATA_SOURCE_ALLOW_LOCAL`.

A name is judged by every address it resolves to, when it is about to be connected to (`allowed_addresses`;
the HTTP clients in `guarded_http` and the data-source engines then dial only those addresses), so a DNS
answer changed after a model or data source was stored cannot reach a refused address. The resolver is
`resolver()`; `use_resolver` swaps it (tests give names the answers they need without touching DNS).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from agentkb.errors import BadRequest

__all__ = [
    "METADATA_ADDRESSES",
    "METADATA_HOSTS",
    "MODEL_URL_KEYS",
    "DataSourcePolicy",
    "DestinationRefused",
    "IPAddress",
    "Resolver",
    "allowed_addresses",
    "check_model_urls",
    "check_url",
    "never",
    "own_servers",
    "refusal",
    "resolve_host",
    "resolver",
    "use_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Sequence[IPAddress]]
"""(host, port) → every address the host resolves to; blocking; raises OSError when it does not resolve."""

NEVER = "a link-local / cloud metadata address: agentkb never connects there"
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_SHARED = ipaddress.IPv4Network("100.64.0.0/10")  # RFC 6598, carrier-grade NAT
_KINDS = (  # the most telling first: 0.0.0.0 is also "private", :: also "reserved"
    ("unspecified", "an unspecified address"),
    ("loopback", "a loopback address"),
    ("private", "a private address"),
    ("multicast", "a multicast address"),
    ("reserved", "a reserved address"),
)

# Cloud instance-metadata endpoints outside the link-local ranges (and the best known inside them).
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, ...
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "100.100.100.200",  # Alibaba Cloud
    )
)
# Names of metadata services, refused before any lookup (they resolve to the addresses above).
METADATA_HOSTS = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.internal",
        "metadata.tencentyun.com",
    }
)
# Where a model object (an agent's `model` or `params`, an embedding or reranking model) names its server.
MODEL_URL_KEYS = (
    "base_url",
    "api_base",
    "openai_api_base",
    "anthropic_api_url",
    "ollama_base_url",
    "azure_endpoint",
    "endpoint_url",
    "litellm_api_base",
    "nvidia_nim_base_url",
)


class DestinationRefused(BadRequest):
    """A destination this server does not connect to (400); the detail names it and the rule."""

    title = "Destination refused"


def resolve_host(host: str, port: int) -> list[IPAddress]:
    """The system resolver: every address `host` resolves to, in getaddrinfo's order (blocking)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


_resolver: Resolver = resolve_host


def resolver() -> Resolver:
    """The resolver every check uses (the system's unless `use_resolver` swapped it)."""
    return _resolver


@contextmanager
def use_resolver(answers: Resolver | Mapping[str, Sequence[str]]) -> Iterator[None]:
    """Resolve names with `answers` (a resolver, or host → addresses; other names resolve as before) for the
    duration of the block, in every thread of the process."""
    global _resolver
    previous = _resolver
    if isinstance(answers, Mapping):
        table = {host.lower(): [ipaddress.ip_address(a) for a in addrs] for host, addrs in answers.items()}

        def lookup(host: str, port: int) -> Sequence[IPAddress]:
            found = table.get(host.lower().rstrip("."))
            return found if found is not None else previous(host, port)

        _resolver = lookup
    else:
        _resolver = answers
    try:
        yield
    finally:
        _resolver = previous


def _reached(address: IPAddress) -> list[IPAddress]:
    """The addresses a connection to `address` may reach: an IPv4-mapped (`::ffff:a.b.c.d`) or NAT64
    (`64:ff9b::a.b.c.d`) address reaches its IPv4 address alone; 6to4, Teredo and IPv4-compatible addresses
    reach both themselves and the IPv4 address they embed."""
    if isinstance(address, ipaddress.IPv4Address):
        return [address]
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address in _NAT64:
        return [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)]
    found: list[IPAddress] = [address]
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    if address in _IPV4_COMPATIBLE and int(address) > 1:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def never(address: IPAddress) -> bool:
    """Whether `address` is link-local or a cloud metadata address (refused for every destination)."""
    return any(a.is_link_local or a in METADATA_ADDRESSES for a in _reached(address))


def refusal(address: IPAddress, allow_private: bool) -> str | None:
    """The crawler's rule: why `address` may not be fetched, or None when it may. Link-local and metadata
    addresses never; loopback, private, multicast, reserved, unspecified, shared (100.64/10) and other
    non-global addresses only with `allow_private`."""
    if never(address):
        return "a link-local / cloud metadata address"
    if allow_private:
        return None
    for candidate in _reached(address):
        for kind, label in _KINDS:
            if getattr(candidate, f"is_{kind}"):
                return label
        if candidate in _SHARED:
            return "a shared (carrier-grade NAT) address"
        if not candidate.is_global:
            return "not a public address"
    return None


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def check_host(host: str, what: str) -> None:
    """Refuse a host that is a metadata name or a link-local / metadata literal (no lookup)."""
    name = host.strip().lower().rstrip(".")
    address = _literal(name)
    if name in METADATA_HOSTS or (address is not None and never(address)):
        raise DestinationRefused(f"{what}: host {host} is {NEVER}")


def check_url(url: object, what: str) -> None:
    """Refuse a URL whose host `check_host` refuses (no lookup: the connection checks what the name resolves
    to). A URL that does not parse is left to its user's own validation."""
    if not isinstance(url, str) or not url:
        return
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return
    if host:
        check_host(host, f"{what} {url}")


def check_model_urls(model: Any, what: str) -> None:
    """Refuse a model object (dict) naming a server `check_url` refuses, under any of `MODEL_URL_KEYS`."""
    if isinstance(model, Mapping):
        for key in MODEL_URL_KEYS:
            check_url(model.get(key), f"{what}.{key}")


def allowed_addresses(host: str, port: int, what: str = "") -> tuple[IPAddress, ...]:
    """The addresses a connection to `host` may dial: all it resolves to, once, none of them link-local or
    metadata (one refused answer refuses the host: a later connection could pick it). Blocking (DNS): call
    it in a thread from async code. Raises DestinationRefused, or OSError when the name does not resolve."""
    label = f"{what}: " if what else ""
    check_host(host, label.rstrip(": ") or "destination")
    literal = _literal(host)
    addresses = [literal] if literal is not None else list(resolver()(host.rstrip("."), port))
    if not addresses:
        raise OSError(f"{host} does not resolve")
    unique = tuple(dict.fromkeys(addresses))
    for address in unique:
        if never(address):
            raise DestinationRefused(f"{label}host {host} resolves to {address}, {NEVER}")
    return unique


# --- data sources --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DataSourcePolicy:
    """What a data source may connect to or open.

    `file_dir`: the directory file databases (SQLite) must be in (a relative path is read from it);
    `own_dir`: agentkb's data directory (its database files, keys, uploads), refused unless `allow_local`;
    `own_servers`: (host, port) of agentkb's own PostgreSQL when it listens on TCP, refused unless
    `allow_local`; `allow_local`: also unix sockets. Loopback TCP servers other than agentkb's own are allowed."""

    file_dir: Path
    own_dir: Path | None = None
    own_servers: tuple[tuple[str, int], ...] = ()
    allow_local: bool = False

    def database_file(self, given: str) -> str:
        """The absolute path of a file database, symlinks and `..` resolved, when it is inside `file_dir`
        (and not in agentkb's own directory); raises DestinationRefused otherwise."""
        base = self.file_dir.expanduser().resolve()
        path = (base / Path(given).expanduser()).resolve()
        if self.own_dir is not None and not self.allow_local:
            own = self.own_dir.expanduser().resolve()
            if path.is_relative_to(own) and not path.is_relative_to(base):
                raise DestinationRefused(
                    f"database file {given} is in agentkb's data directory: refused "
                    "(AGENTKB_DATA_SOURCE_ALLOW_LOCAL allows it)"
                )
        if not path.is_relative_to(base):
            raise DestinationRefused(
                f"database file {given} ({path}) is outside the data-source file directory {base}: refused "
                "(AGENTKB_DATA_SOURCE_FILE_DIR sets the directory)"
            )
        return str(path)

    def check_server_host(self, host: str) -> None:
        """Refuse, before any lookup, a unix-socket host (`/dir`, `@abstract`), several hosts, or a metadata
        host."""
        if host.startswith(("/", "@")) or "\\" in host:
            if not self.allow_local:
                raise DestinationRefused(
                    f"host {host} is a unix socket: data sources connect over TCP only "
                    "(AGENTKB_DATA_SOURCE_ALLOW_LOCAL allows sockets)"
                )
            return
        if "," in host:
            raise DestinationRefused(f"host {host} names several hosts: a data source connects to one")
        check_host(host, "data source")

    def server_addresses(self, host: str, port: int) -> tuple[IPAddress, ...]:
        """The addresses a data source at host:port may dial (see `allowed_addresses`), none of them
        agentkb's own PostgreSQL server unless `allow_local`. Blocking (DNS)."""
        addresses = allowed_addresses(host, port, "data source")
        if not self.allow_local:
            for own_host, own_port in self.own_servers:
                if own_port == port and _same_server(addresses, own_host, own_port):
                    raise DestinationRefused(
                        f"data source {host}:{port} is agentkb's own database server: refused "
                        "(AGENTKB_DATA_SOURCE_ALLOW_LOCAL allows it)"
                    )
        return addresses


def _same_server(addresses: Iterable[IPAddress], own_host: str, port: int) -> bool:
    """Whether one of `addresses` is where `own_host` listens: one of its addresses, or any loopback or
    unspecified address when it is itself local."""
    try:
        own = set(allowed_addresses(own_host, port))
    except (OSError, BadRequest):
        return False
    own_local = any(a.is_loopback or a.is_unspecified for a in own)
    return any(a in own or (own_local and (a.is_loopback or a.is_unspecified)) for a in addresses)


def own_servers(database_url: str | None) -> tuple[tuple[str, int], ...]:
    """(host, port) of every TCP server a PostgreSQL URL names (libpq's `host=a,b` and `port=` lists); a
    unix-socket directory is left out (a data source never reaches a socket unless the operator allows it)."""
    if not database_url:
        return ()
    try:
        parts = urlsplit(database_url)
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        hosts = (query.get("host") or parts.hostname or "localhost").split(",")
        ports = (query.get("port") or str(parts.port or os.environ.get("PGPORT") or 5432)).split(",")
        pairs = [(h, int(ports[min(i, len(ports) - 1)])) for i, h in enumerate(hosts)]
    except ValueError:
        return ()
    return tuple((h, p) for h, p in pairs if h and not h.startswith(("/", "@")))
