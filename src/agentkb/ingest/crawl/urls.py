"""URL helpers for the crawler: the canonical form of a URL, domain scope, and the SSRF guard."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

from agentkb.destinations import METADATA_ADDRESSES, IPAddress, Resolver, refusal, resolve_host, resolver
from agentkb.errors import BadRequest

__all__ = [
    "CrawlError",
    "canonical_url",
    "IPAddress",
    "Resolver",
    "check_target",
    "checked_addresses",
    "host_of",
    "in_domains",
    "normalise_domain",
    "refusal",
    "resolve_host",
    "METADATA_ADDRESSES",
]

DEFAULT_PORTS = {"http": 80, "https": 443}
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"
_PLAIN = re.compile(r"^[A-Za-z0-9/:@!$&'()*+,;=._~?-]*$")  # nothing to quote, no escapes to upper-case
_ORIGIN = re.compile(r"^[hH][tT][tT][pP][sS]?://[^/?#\\]+$")
_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")
_HOST_CHARS = re.compile(r"^[a-z0-9_.-]+$")


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


def checked_addresses(
    url: str, allow_private: bool, resolve: Resolver | None = None
) -> tuple[IPAddress, ...]:
    """SSRF guard: the addresses a request for `url` may connect to, resolved once; raises CrawlError (a
    BadRequest) unless EVERY address the host resolves to is allowed (one refused answer among several
    refuses the host: a later connection could pick it). An IP-literal host is not resolved.

    Loopback, private, multicast, reserved, unspecified, shared (100.64/10) and other non-global
    addresses are allowed with `allow_private`; link-local and cloud metadata addresses never are
    (`destinations.refusal`). The caller
    must connect only to the returned addresses (see `pinning`), never resolve the name again. Blocking
    (DNS): call it in a thread from async code. `resolve` defaults to `destinations.resolver()`."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port or DEFAULT_PORTS.get(parts.scheme.lower(), 80)
    except ValueError:
        host = None
        port = 0
    if not host:
        raise CrawlError(f"Invalid URL: {url!r}")
    literal = True
    try:
        addresses: list[IPAddress] = [ipaddress.ip_address(host)]
    except ValueError:
        literal = False
        try:
            addresses = list((resolve or resolver())(host, port))
        except (OSError, UnicodeError) as exc:
            raise CrawlError(f"Cannot resolve the host of {url}: {exc}", reason="dns") from exc
        if not addresses:
            raise CrawlError(f"Cannot resolve the host of {url}", reason="dns") from None
    unique = tuple(dict.fromkeys(addresses))
    for address in unique:
        why = refusal(address, allow_private)
        if why is not None:
            among = f" (one of {len(unique)} addresses)" if len(unique) > 1 else ""
            what = f"{address} is" if literal else f"{host} resolves to {address}{among},"
            raise CrawlError(f"Refusing to fetch {url}: {what} {why}", reason="ssrf")
    return unique


def check_target(url: str, allow_private: bool, resolve: Resolver | None = None) -> None:
    """The SSRF guard's verdict alone (see `checked_addresses`): raises CrawlError when `url` is refused."""
    checked_addresses(url, allow_private, resolve)
