"""Fetching for the crawler: per-host politeness, robots.txt, the SSRF guard on every hop (each host resolved
once, every answer checked, connections pinned to the checked addresses), manual redirects, conditional
requests, size and time limits, sitemaps."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from urllib.parse import urlsplit

import httpx
from protego import Protego

from agentkb.ingest.crawl.content import gunzip, media_type, parse_sitemap, sniff
from agentkb.ingest.crawl.extract import pdf_supported
from agentkb.ingest.crawl.types import CrawlOptions, Skipped, Validators
from agentkb.ingest.crawl.urls import (
    CrawlError,
    IPAddress,
    Resolver,
    canonical_url,
    checked_addresses,
    host_of,
    in_domains,
)

__all__ = ["HTML_TYPES", "PDF_TYPES", "TEXT_TYPES", "Fetched", "Fetcher", "HostGate", "Known"]

log = logging.getLogger(__name__)

Known = Callable[[str], Awaitable[Validators | None]]

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"text/plain"})
PDF_TYPES = frozenset({"application/pdf"})
SITEMAP_TYPES = frozenset({"application/xml", "text/xml", "application/gzip", "application/x-gzip"})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_CRAWL_DELAY_S = 2.0
ROBOTS_MAX_BYTES = 512 * 1024  # RFC 9309: parse at least 500 KiB
MAX_SITEMAP_FILES = 10
ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,application/pdf;q=0.8,*/*;q=0.1"


@dataclass(frozen=True)
class Fetched:
    """A successful fetch: 2xx with a body, or 304 (body b"") when validators were sent."""

    url: str  # canonical URL after redirects
    status: int
    content_type: str  # media type, lower case, "" when absent on a 304
    charset: str | None
    body: bytes
    etag: str | None
    last_modified: str | None
    sent: Validators | None  # the validators sent with the request


@dataclass(frozen=True)
class _Redirect:
    target: str


class HostGate:
    """At most `per_host` requests in flight to one host, started at least `delay` seconds apart."""

    def __init__(self, per_host: int) -> None:
        self._slots = asyncio.Semaphore(per_host)
        self.delay = 0.0
        self._next_start = 0.0

    async def __aenter__(self) -> None:
        await self._slots.acquire()
        try:
            if self.delay > 0:
                loop = asyncio.get_running_loop()
                now = loop.time()
                start = max(now, self._next_start)
                self._next_start = start + self.delay
                if start > now:
                    await asyncio.sleep(start - now)
        except BaseException:
            self._slots.release()
            raise

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._slots.release()


@dataclass(frozen=True)
class _Robots:
    parser: Protego | None  # None: no usable rules
    allow_all: bool
    note: str = ""
    reason: str = "robots"  # the Skipped reason when pages are refused without rules


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class Fetcher:
    """Shared fetch state of one crawl: host gates, robots.txt rules, SSRF verdicts and pinned addresses,
    known validators.

    `client` must connect only to the addresses in `pins` (`pinning.pinned_client(fetcher.pins)`), which
    `target_error` fills: a host is resolved once per crawl (by `resolver`, default the system's), every
    answer is checked, and the checked answers are what the connection may use."""

    def __init__(
        self,
        options: CrawlOptions,
        client: httpx.AsyncClient,
        known: Known | None,
        domains: set[str],
        *,
        pins: dict[str, tuple[IPAddress, ...]],
        resolver: Resolver | None = None,
    ) -> None:
        self.options = options
        self.client = client
        self.known_fn = known
        self.domains = domains  # shared with the crawler, which may add to it
        self.pins = pins
        self.resolver = resolver
        self.gates: dict[str, HostGate] = {}
        self.targets: dict[str, CrawlError | None] = {}
        self._target_locks: dict[str, asyncio.Lock] = {}
        self.robots: dict[str, _Robots] = {}
        self._robots_locks: dict[str, asyncio.Lock] = {}
        self._known: dict[str, Validators | None] = {}
        self.timeout = httpx.Timeout(options.page_timeout_s)

    def gate(self, host: str) -> HostGate:
        gate = self.gates.get(host)
        if gate is None:
            gate = self.gates[host] = HostGate(self.options.per_host)
        return gate

    async def known(self, url: str) -> Validators | None:
        if self.known_fn is None:
            return None
        if url not in self._known:
            self._known[url] = await self.known_fn(url)
        return self._known[url]

    async def target_error(self, url: str) -> CrawlError | None:
        """The SSRF guard's verdict on `url`'s host, None when it may be fetched. The host is resolved once
        for the crawl (concurrent callers wait for that one answer); its checked addresses are pinned."""
        host = host_of(url)
        if host not in self.targets:
            async with self._target_locks.setdefault(host, asyncio.Lock()):
                if host not in self.targets:
                    allow_private = self.options.allow_private
                    try:
                        addresses = await asyncio.to_thread(
                            checked_addresses, url, allow_private, self.resolver
                        )
                    except CrawlError as exc:
                        self.targets[host] = exc
                    else:
                        self.pins[host] = addresses
                        self.targets[host] = None
        return self.targets[host]

    # -- robots.txt -------------------------------------------------------------------------------

    async def robots_for(self, url: str) -> _Robots:
        origin = _origin(url)
        rules = self.robots.get(origin)
        if rules is not None:
            return rules
        lock = self._robots_locks.setdefault(origin, asyncio.Lock())
        async with lock:
            rules = self.robots.get(origin)
            if rules is None:
                rules = self.robots[origin] = await self._fetch_robots(origin)
                delay = rules.parser.crawl_delay(self.options.user_agent) if rules.parser else None
                if delay:
                    self.gate(host_of(url)).delay = min(float(delay), MAX_CRAWL_DELAY_S)
        return rules

    async def _fetch_robots(self, origin: str) -> _Robots:
        current = origin + "/robots.txt"
        visited = {current}
        for _ in range(6):  # RFC 9309: follow at least five redirects
            if await self.target_error(current) is not None:
                return _Robots(None, allow_all=True, note="robots.txt target refused")
            try:
                async with self.gate(host_of(current)):
                    async with asyncio.timeout(self.options.page_timeout_s):
                        outcome = await self._get_robots(current)
            except (TimeoutError, httpx.TimeoutException) as exc:
                return _Robots(None, allow_all=False, note=f"robots.txt timed out: {type(exc).__name__}")
            except (
                httpx.HTTPError,
                httpx.InvalidURL,
                httpx.StreamError,
                OSError,
            ) as exc:  # RFC 9309: disallow
                note = f"host unreachable (robots.txt: {type(exc).__name__}: {exc})"
                return _Robots(None, allow_all=False, note=note, reason="error")
            if isinstance(outcome, _Robots):
                return outcome
            if outcome.target in visited:
                break
            visited.add(current := outcome.target)
        return _Robots(None, allow_all=True, note="robots.txt redirects too often")

    async def _get_robots(self, url: str) -> _Robots | _Redirect:
        headers = {"User-Agent": self.options.user_agent}
        request = self.client.build_request("GET", url, headers=headers, timeout=self.timeout)
        response = await self.client.send(request, stream=True, follow_redirects=False)
        try:
            status = response.status_code
            if status in REDIRECT_STATUSES and "location" in response.headers:
                target = canonical_url(response.headers["location"], url)
                if target is None:
                    return _Robots(None, allow_all=True, note="robots.txt redirects off the web")
                return _Redirect(target)
            if 200 <= status < 300:
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) >= ROBOTS_MAX_BYTES:
                        break
                try:
                    text = bytes(body[:ROBOTS_MAX_BYTES]).decode("utf-8", errors="replace")
                    return _Robots(Protego.parse(text), allow_all=True)
                except Exception:  # noqa: BLE001 - a parser failure: treat like an absent robots.txt
                    return _Robots(None, allow_all=True, note="robots.txt unparsable")
            if 400 <= status < 500 and status != 429:
                return _Robots(None, allow_all=True, note=f"robots.txt http {status}")
            return _Robots(None, allow_all=False, note=f"robots.txt unreachable: http {status}")
        finally:
            await response.aclose()

    async def robots_refusal(self, url: str) -> tuple[str, str] | None:
        """(reason, detail) when robots.txt rules out `url`, else None."""
        rules = await self.robots_for(url)
        if rules.parser is not None:
            if rules.parser.can_fetch(url, self.options.user_agent):
                return None
            return "robots", "disallowed by robots.txt"
        return None if rules.allow_all else (rules.reason, rules.note)

    # -- pages ------------------------------------------------------------------------------------

    async def fetch(
        self, url: str, depth: int, *, conditional: bool, types: frozenset[str] | None = None
    ) -> Fetched | Skipped:
        """GET `url`, following redirects by hand. Every hop is SSRF-checked and robots-checked; hops of a
        page found by a link (depth > 0) must stay within the allowed domains."""
        types = types if types is not None else HTML_TYPES | TEXT_TYPES | PDF_TYPES
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        current = url
        visited = [url]
        for _hop in range(self.options.max_redirects + 1):
            if current != url and depth > 0 and not in_domains(host_of(current), self.domains):
                return Skipped(url, "off-domain", f"redirects to {current}")
            refused = await self.target_error(current)
            if refused is not None:
                return Skipped(url, refused.reason, refused.detail)
            if self.options.respect_robots:
                refusal = await self.robots_refusal(current)
                if refusal is not None:
                    reason, note = refusal
                    return Skipped(url, reason, note if current == url else f"{current}: {note}")
            sent = await self.known(current) if conditional else None
            try:
                async with self.gate(host_of(current)):
                    if deadline is None:
                        deadline = loop.time() + self.options.page_timeout_s
                    async with asyncio.timeout_at(deadline):
                        outcome = await self._get(url, current, sent, types)
            except TimeoutError:
                return Skipped(url, "timeout", f"no complete answer within {self.options.page_timeout_s} s")
            except httpx.TimeoutException as exc:
                return Skipped(url, "timeout", f"{type(exc).__name__}")
            except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError) as exc:
                return Skipped(url, "error", f"{type(exc).__name__}: {exc}")
            if not isinstance(outcome, _Redirect):
                return outcome
            if outcome.target in visited:
                return Skipped(url, "redirect loop", " → ".join([*visited, outcome.target]))
            visited.append(current := outcome.target)
        return Skipped(url, "too many redirects", f"more than {self.options.max_redirects}")

    def _headers(self, sent: Validators | None) -> dict[str, str]:
        headers = {"User-Agent": self.options.user_agent, "Accept": ACCEPT}
        if sent is not None:
            if sent.etag:
                headers["If-None-Match"] = sent.etag
            if sent.last_modified:
                headers["If-Modified-Since"] = sent.last_modified
        return headers

    async def _get(
        self, url: str, current: str, sent: Validators | None, types: frozenset[str]
    ) -> Fetched | Skipped | _Redirect:
        request = self.client.build_request("GET", current, headers=self._headers(sent), timeout=self.timeout)
        response = await self.client.send(request, stream=True, follow_redirects=False)
        try:
            status = response.status_code
            headers = response.headers
            if status in REDIRECT_STATUSES:
                target = (
                    canonical_url(headers.get("location", ""), current) if "location" in headers else None
                )
                if target is None:
                    return Skipped(url, f"http {status}", "redirect without a usable http(s) Location")
                return _Redirect(target)
            mime, charset = media_type(headers.get("content-type"))
            etag, last_modified = headers.get("etag"), headers.get("last-modified")
            if status == 304 and sent is not None and (sent.etag or sent.last_modified):
                return Fetched(
                    current,
                    304,
                    mime,
                    charset,
                    b"",
                    etag or sent.etag,
                    last_modified or sent.last_modified,
                    sent,
                )
            if not 200 <= status < 300 or status in (204, 205, 206):
                return Skipped(url, f"http {status}", response.reason_phrase)
            if mime and mime not in types:
                return Skipped(url, "type", mime)
            if mime in PDF_TYPES and not pdf_supported():
                return Skipped(url, "pdf support not installed", "install pypdf to read PDFs")
            limit = self.options.max_page_bytes
            declared = headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                return Skipped(url, "too large", f"Content-Length {declared} > {limit} bytes")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > limit:
                    return Skipped(url, "too large", f"more than {limit} bytes")
            if not mime:
                mime = sniff(bytes(body))
                if mime not in types:
                    return Skipped(url, "type", f"{mime} (sniffed)")
            return Fetched(current, status, mime, charset, bytes(body), etag, last_modified, sent)
        finally:
            await response.aclose()

    # -- sitemaps ---------------------------------------------------------------------------------

    async def sitemap_urls(self, start: str, most: int) -> list[str]:
        """Page URLs listed by the sitemaps of `start`'s origin (robots.txt `Sitemap:` lines, else
        /sitemap.xml), following sitemap indexes; at most `most` URLs and MAX_SITEMAP_FILES files."""
        origin = _origin(start)
        rules = await self.robots_for(start)
        queue = [u for u in (canonical_url(s) for s in (rules.parser.sitemaps if rules.parser else [])) if u]
        queue = queue or [origin + "/sitemap.xml"]
        seen_files: set[str] = set()
        found: dict[str, None] = {}
        while queue and len(seen_files) < MAX_SITEMAP_FILES and len(found) < most:
            sitemap = queue.pop(0)
            if sitemap in seen_files:
                continue
            seen_files.add(sitemap)
            result = await self.fetch(sitemap, 1, conditional=False, types=SITEMAP_TYPES | TEXT_TYPES)
            if isinstance(result, Skipped):
                log.info("sitemap %s skipped: %s %s", sitemap, result.reason, result.detail)
                continue
            body = result.body
            if body[:2] == b"\x1f\x8b":
                body = gunzip(body, self.options.max_page_bytes)
            kind, locs = parse_sitemap(body)
            for loc in locs:
                link = canonical_url(loc, sitemap)
                if link is None:
                    continue
                if kind == "index":
                    queue.append(link)
                elif len(found) < most:
                    found[link] = None
        return list(found)
