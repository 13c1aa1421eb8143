"""URL helpers for the crawler: the canonical form of a URL, domain scope, and the SSRF guard."""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

from agentkb.errors import BadRequest

__all__ = [
    "CrawlError",
    "canonical_url",
    "check_target",
    "host_of",
    "in_domains",
    "normalise_domain",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

DEFAULT_PORTS = {"http": 80, "https": 443}
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"
_PLAIN = re.compile(r"^[A-Za-z0-9/:@!$&'()*+,;=._~?-]*$")  # nothing to quote, no escapes to upper-case
_ORIGIN = re.compile(r"^[hH][tT][tT][pP][sS]?://[^/?#\\]+$")
_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")
_HOST_CHARS = re.compile(r"^[a-z0-9_.-]+$")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

# Cloud instance-metadata endpoints: refused even when private addresses are allowed.
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, ...
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "100.100.100.200",  # Alibaba Cloud
    )
)


class CrawlError(BadRequest):
    """A start URL or crawl option that is invalid or refused (400). `reason` is a short category
    (`invalid url`, `ssrf`, `dns`, `options`) that the crawler reuses for `Skipped.reason`."""

    def __init__(self, detail: str, *, reason: str = "invalid url") -> None:
        super().__init__(detail)
        self.reason = reason


def canonical_url(url: str, base: str | None = None) -> str | None:
    """The canonical form of `url` (resolved against `base`), or None when it is not a usable http(s) URL.

    Scheme and host are lower-cased, the host is IDNA-encoded, a default port, the fragment and any
    `user:password@` part are dropped (a URL carrying credentials gives None), dot segments are
    resolved, unsafe characters are percent-encoded (escapes upper-cased), an empty path becomes `/`;
    the query is kept as it is.
    """
    url = url.strip()
    if "\t" in url or "\n" in url or "\r" in url:
        url = url.translate({9: None, 10: None, 13: None})
    if base is not None and not url[:8].lower().startswith(("http://", "https://")):
        origin = "/".join(base.split("/", 3)[:3])
        if url.startswith("/") and not url.startswith("//") and _ORIGIN.match(origin):
            url = origin + url  # the common root-relative link, without urljoin's cost
        else:
            try:
                url = urljoin(base, url)
            except ValueError:
                return None
    return _canonical_absolute(url)


@lru_cache(maxsize=65_536)
def _canonical_absolute(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or "@" in parts.netloc:
        return None
    host = _canonical_host(parts.hostname or "")
    if host is None:
        return None
    netloc = host if port is None or port == DEFAULT_PORTS[scheme] else f"{host}:{port}"
    path = _remove_dot_segments(_quote(parts.path, _PATH_SAFE)) or "/"
    query = _quote(parts.query, _QUERY_SAFE)
    return urlunsplit((scheme, netloc, path, query, ""))


def _canonical_host(host: str) -> str | None:
    host = host.rstrip(".")
    if not host:
        return None
    if ":" in host:
        try:
            return f"[{ipaddress.IPv6Address(host).compressed}]"
        except ValueError:  # includes zone ids (fe80::1%eth0)
            return None
    try:
        host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return None
    return host if _HOST_CHARS.match(host) else None


def _quote(value: str, safe: str) -> str:
    if _PLAIN.match(value):
        return value
    value = quote(value, safe=safe)
    return _PERCENT.sub(lambda m: m.group().upper(), value) if "%" in value else value


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4 for an absolute path."""
    segments = path.split("/")
    if "." not in segments and ".." not in segments:
        return path
    out: list[str] = []
    for segment in segments:
        if segment == "..":
            if len(out) > 1:
                out.pop()
        elif segment != ".":
            out.append(segment)
    if segments[-1] in (".", ".."):
        out.append("")
    return "/".join(out)


@lru_cache(maxsize=65_536)
def host_of(url: str) -> str:
    """The lower-case host of a URL, without port or IPv6 brackets ("" when it has none)."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def normalise_domain(domain: str) -> str:
    """`Example.COM`, `*.example.com`, `https://example.com/docs` → `example.com`; raises CrawlError."""
    value = domain.strip().lower()
    if "://" in value:
        value = urlsplit(value).hostname or ""
    else:
        value = value.split("/", 1)[0]
        value = value.rsplit(":", 1)[0] if value.count(":") == 1 else value.strip("[]")
    value = value.lstrip("*").strip(".")
    host = _canonical_host(value) if value else None
    if host is None:
        raise CrawlError(f"Invalid domain in allowed_domains: {domain!r}", reason="options")
    return host.strip("[]")


def in_domains(host: str, domains: Iterable[str]) -> bool:
    """Whether `host` is one of `domains` or a subdomain of one."""
    return any(host == d or host.endswith("." + d) for d in domains)


def _resolve(host: str, port: int) -> list[IPAddress]:
    """All addresses `host` resolves to (blocking: call it in a thread)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    found = [address.sixtofour] if address.sixtofour is not None else []
    if address.teredo is not None:
        found.extend(address.teredo)
    if address in _NAT64:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def refusal(address: IPAddress, allow_private: bool) -> str | None:
    """Why `address` may not be fetched, or None when it may."""
    candidates: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            candidates = [address.ipv4_mapped]
        else:
            candidates.extend(_embedded_ipv4(address))
    for candidate in candidates:
        if candidate in METADATA_ADDRESSES:
            return "a cloud metadata address"
        if allow_private:
            continue
        for kind in ("loopback", "private", "link_local", "multicast", "reserved", "unspecified"):
            if getattr(candidate, f"is_{kind}"):
                return f"a {kind.replace('_', '-')} address"
        if not candidate.is_global:
            return "not a public address"
    return None


def check_target(url: str, allow_private: bool) -> None:
    """SSRF guard: raise CrawlError (a BadRequest) unless every address `url`'s host resolves to is
    public. Loopback, private, link-local, multicast, reserved, unspecified and other non-global
    addresses are allowed with `allow_private`; cloud metadata addresses never are. Blocking (DNS):
    call it in a thread from async code."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port or DEFAULT_PORTS.get(parts.scheme.lower(), 80)
    except ValueError:
        host = None
        port = 0
    if not host:
        raise CrawlError(f"Invalid URL: {url!r}")
    try:
        addresses: list[IPAddress] = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            addresses = _resolve(host, port)
        except (OSError, UnicodeError) as exc:
            raise CrawlError(f"Cannot resolve the host of {url}: {exc}", reason="dns") from exc
        if not addresses:
            raise CrawlError(f"Cannot resolve the host of {url}", reason="dns") from None
    for address in addresses:
        why = refusal(address, allow_private)
        if why is not None:
            raise CrawlError(f"Refusing to fetch {url}: {host} resolves to {address}, {why}", reason="ssrf")
