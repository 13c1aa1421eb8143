"""An async, polite, bounded web crawler for knowledge-base inserts (`urls`, `limit`, `crawl_depth`, `filters`).

    async for item in crawl(CrawlOptions(urls=[...], crawl_depth=1, limit=50), known):
        if isinstance(item, Page): ...      # text to chunk and embed
        else: ...                           # Skipped(url, reason, detail)

Breadth-first by depth (depth = link hops from a start URL; a level is finished before the next starts, so
a page's depth is its shortest distance). The frontier is de-duplicated on canonical URLs; a fetched page is
a duplicate when its redirect target or `<link rel=canonical>` (which then becomes `Page.url`) or its
exact content was already yielded (a rel=canonical naming a page already yielded with other content is
ignored, so a wrong one loses nothing). Only text/html, text/plain and
application/pdf are read. Every request goes through the SSRF guard, robots.txt (once per origin,
Crawl-delay capped at 2 s) and a per-host concurrency gate; redirects are followed by hand so each hop is
checked. The crawler owns its HTTP client: each host is resolved once, every answer is checked, and
connections go only to the checked addresses (`pinning`), so a DNS answer that changes between the check
and the connection (DNS rebinding) cannot reach a private address. `limit` caps the pages yielded (at most
`limit - yielded` requests are ever in flight, so no page is fetched for nothing); the crawl always ends:
at most 10 000 pages and 50 000 distinct URLs.

Pages at the last depth (whose links are not followed) are fetched conditionally when `known` returns
validators (304 → `not_modified`, empty text); others are fetched in full, so their links can be followed,
and compared by content hash.
"""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import os
import sys
from collections import deque
from collections.abc import AsyncGenerator
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import httpcore

from agentkb.errors import BadRequest
from agentkb.ingest.crawl.extract import Extracted, extract_html, extract_pdf, extract_plain
from agentkb.ingest.crawl.fetch import HTML_TYPES, PDF_TYPES, Fetched, Fetcher, Known
from agentkb.ingest.crawl.pinning import pinned_client
from agentkb.ingest.crawl.types import CrawlOptions, Page, Skipped, Validators
from agentkb.ingest.crawl.urls import (
    CrawlError,
    IPAddress,
    Resolver,
    canonical_url,
    check_target,
    host_of,
    in_domains,
    normalise_domain,
)
from agentkb.patterns import compile_regex, matches

__all__ = [
    "CrawlError",
    "CrawlOptions",
    "Page",
    "Resolver",
    "Skipped",
    "Validators",
    "canonical_url",
    "check_target",
    "crawl",
    "extraction_pool",
    "page_cap",
]

DEFAULT_PAGE_LIMIT = 1_000
MAX_PAGE_LIMIT = 10_000
MAX_START_URLS = 1_000
MAX_SEEN_URLS = 50_000
MAX_LINKS_PER_PAGE = 5_000
_EXTENSIONS = """
    7z apk avi bin bmp bz2 css csv deb dmg doc docx eot epub exe flac gif gz ico iso jar jpeg jpg js json
    m4a m4v mkv mov mp3 mp4 mpeg mpg msi ogg otf png ppt pptx rar rpm rss svg tar tgz tif tiff ttf wasm wav
    webm webp woff woff2 xls xlsx xml xz zip
"""
SKIPPED_EXTENSIONS = frozenset("." + ext for ext in _EXTENSIONS.split())  # links not followed, by name


def page_cap(options: CrawlOptions) -> int:
    """The most pages a crawl with `options` yields: a crawl that yields this many may have been cut short."""
    return min(options.limit or DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT)


async def crawl(
    options: CrawlOptions,
    known: Known | None = None,
    *,
    executor: Executor | None = None,
    resolver: Resolver | None = None,
    network: httpcore.AsyncNetworkBackend | None = None,
) -> AsyncGenerator[Page | Skipped, None]:
    """Crawl from `options.urls`, yielding each page (or the reason a URL was skipped) as soon as it is
    done. Raises CrawlError (400), before yielding anything, for invalid options, an invalid start URL or
    one the SSRF guard refuses. `known(url)` returns what an earlier crawl saw of a URL. Text extraction
    (CPU-bound) runs in `executor`, by default the event loop's thread pool; a pool from
    `extraction_pool()` uses more cores. `resolver` (host, port → addresses; default the system's) and
    `network` (the httpcore backend that dials the checked addresses; default AnyIO's) are for tests.
    """
    pins: dict[str, tuple[IPAddress, ...]] = {}
    async with pinned_client(pins, network, timeout=options.page_timeout_s) as client:
        state = _Crawl(
            options, Fetcher(options, client, known, set(), pins=pins, resolver=resolver), executor
        )
        await state.check_starts()
        async for item in state.run():
            yield item


@dataclass
class _Outcome:
    item: Page | Skipped
    links: list[str] = field(default_factory=list)
    aliases: tuple[str, ...] = ()  # (URL fetched after redirects, URL named by rel=canonical)
    known_hashes: dict[str, str | None] = field(default_factory=dict)  # URL → content hash seen before


class _HostQueues:
    """URLs waiting in one level, per host, served round-robin to hosts with a free slot."""

    def __init__(self, per_host: int) -> None:
        self.per_host = per_host
        self.queues: dict[str, deque[str]] = {}
        self.hosts: deque[str] = deque()
        self.busy: dict[str, int] = {}

    def push(self, url: str) -> None:
        host = host_of(url)
        if host not in self.queues:
            self.queues[host] = deque()
            self.hosts.append(host)
        self.queues[host].append(url)

    def pop(self) -> str | None:
        for _ in range(len(self.hosts)):
            host = self.hosts[0]
            queue = self.queues[host]
            if not queue:
                self.hosts.popleft()
                del self.queues[host]
                continue
            self.hosts.rotate(-1)
            if self.busy.get(host, 0) < self.per_host:
                self.busy[host] = self.busy.get(host, 0) + 1
                return queue.popleft()
        return None

    def release(self, url: str) -> None:
        self.busy[host_of(url)] -= 1


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _extract(fetched: Fetched, max_links: int) -> Extracted:
    if fetched.content_type in HTML_TYPES:
        return extract_html(fetched.body, fetched.url, fetched.charset, max_links)
    if fetched.content_type in PDF_TYPES:
        return extract_pdf(fetched.body)
    return extract_plain(fetched.body, fetched.charset)


def extraction_pool(workers: int | None = None) -> ProcessPoolExecutor:
    """A process pool for `crawl(..., executor=)`: text extraction on several cores, free of the GIL.
    Workers are started with `forkserver` (safe in a threaded server) and import the extractor once."""
    workers = workers or max(1, min(8, (os.cpu_count() or 2) - 1))
    context = multiprocessing.get_context("forkserver" if sys.platform != "win32" else "spawn")
    return ProcessPoolExecutor(workers, mp_context=context, initializer=_warm_up)


def _warm_up() -> None:
    extract_html(b"<html><body><p>warm up</p></body></html>", "http://localhost/", None, 1)


def _site_domain(host: str) -> str:
    return host[4:] if host.startswith("www.") and host.count(".") >= 2 else host


class _Crawl:
    def __init__(self, options: CrawlOptions, fetcher: Fetcher, executor: Executor | None) -> None:
        if isinstance(options.urls, str) or not options.urls:
            raise CrawlError("urls must be a non-empty list of URLs", reason="options")
        if len(options.urls) > MAX_START_URLS:
            raise CrawlError(f"At most {MAX_START_URLS} urls per crawl", reason="options")
        for name in ("concurrency", "per_host", "max_page_bytes"):
            if getattr(options, name) < 1:
                raise CrawlError(f"{name} must be at least 1", reason="options")
        if options.crawl_depth < 0:
            raise CrawlError("crawl_depth must be 0 or more", reason="options")
        if options.limit is not None and options.limit < 1:
            raise CrawlError("limit must be at least 1", reason="options")
        if options.page_timeout_s <= 0 or options.max_redirects < 0:
            raise CrawlError("page_timeout_s must be positive, max_redirects 0 or more", reason="options")
        self.options = options
        self.executor = executor
        self.cap = page_cap(options)
        self.starts: dict[str, None] = {}
        for url in options.urls:
            canonical = canonical_url(url) if isinstance(url, str) else None
            if canonical is None:
                raise CrawlError(f"Not an http(s) URL: {url!r}")
            self.starts[canonical] = None
        self.default_domains = options.allowed_domains is None
        self.domains = fetcher.domains  # shared: a start URL's redirect may add its host
        if options.allowed_domains is None:
            self.domains.update(_site_domain(host_of(url)) for url in self.starts)
        else:
            self.domains.update(normalise_domain(d) for d in options.allowed_domains)
        try:  # RE2: linear time in the URL, whatever the pattern (a user's regex runs on the event loop)
            self.patterns = [compile_regex(p, "URL pattern") for p in options.url_patterns or []]
        except BadRequest as exc:
            raise CrawlError(exc.detail, reason="options") from exc
        self.fetcher = fetcher
        self.seen: set[str] = set(self.starts)
        self.yielded: dict[str, str] = {}  # page URL → content hash
        self.hashes: dict[str, str] = {}  # content hash → page URL
        self.pages = 0

    async def check_starts(self) -> None:
        """The SSRF guard on every start URL; a host that does not resolve is skipped later, not refused."""
        for url in self.starts:
            refused = await self.fetcher.target_error(url)
            if refused is not None and refused.reason != "dns":
                raise refused

    def _filter(self, url: str) -> Skipped | None:
        """Why a linked URL is not fetched, or None."""
        if not in_domains(host_of(url), self.domains):
            return Skipped(url, "off-domain", f"not in {sorted(self.domains)}")
        if self.patterns and not any(matches(p, url) for p in self.patterns):  # a URL too long matches none
            return Skipped(url, "pattern", "matches none of url_patterns")
        path = url.split("?", 1)[0].rsplit("/", 1)[-1].lower()
        if "." in path and path[path.rindex(".") :] in SKIPPED_EXTENSIONS:
            return Skipped(url, "type", "not a page, by its extension")
        return None

    async def run(self) -> AsyncGenerator[Page | Skipped, None]:
        pending: dict[asyncio.Task[_Outcome], str] = {}
        try:
            level: dict[str, None] = dict(self.starts)
            depth = 0
            while level:
                queues = _HostQueues(self.options.per_host)
                for url in level:
                    queues.push(url)
                found: dict[str, None] = {}
                while True:
                    while len(pending) < min(self.options.concurrency, self.cap - self.pages):
                        next_url = queues.pop()
                        if next_url is None:
                            break
                        pending[asyncio.create_task(self._process(next_url, depth))] = next_url
                    if not pending:
                        break
                    done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        url = pending.pop(task)
                        queues.release(url)
                        item = self._accept(task.result(), url, found)
                        yield item
                        if self.pages >= self.cap:
                            return
                if self.pages >= self.cap or depth >= self.options.crawl_depth:
                    return
                if depth == 0 and self.options.use_sitemap:
                    for start in self.starts:
                        for link in await self.fetcher.sitemap_urls(start, MAX_SEEN_URLS - len(self.seen)):
                            if link not in self.seen:
                                self.seen.add(link)
                                found[link] = None
                depth += 1
                level = {}
                for url in found:
                    skipped = self._filter(url)
                    if skipped is None:
                        level[url] = None
                    else:
                        yield skipped
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    def _accept(self, outcome: _Outcome, url: str, found: dict[str, None]) -> Page | Skipped:
        """Count a finished page (or turn it into a duplicate) and add its links to the next level.

        A page is a duplicate when its URL (its rel=canonical if it declared one in scope) or its content
        was already yielded. A page whose rel=canonical was already yielded with other content keeps its
        own URL: a wrong rel=canonical (say, every page pointing at the home page) loses no content."""
        item = outcome.item
        if not isinstance(item, Page):
            return item
        own_url = outcome.aliases[0] if outcome.aliases else item.url
        earlier = self.yielded.get(item.url)
        if earlier is not None and earlier != item.content_hash and own_url not in self.yielded:
            item = replace(item, url=own_url)
        if item.status != 304:
            before = outcome.known_hashes.get(item.url) or outcome.known_hashes.get(url)
            item = replace(item, not_modified=before == item.content_hash)
        if item.url in self.yielded:
            return Skipped(url, "duplicate", f"same page as {item.url}")
        if item.content_hash and item.content_hash in self.hashes:
            return Skipped(url, "duplicate", f"same content as {self.hashes[item.content_hash]}")
        self.yielded[item.url] = item.content_hash
        if item.content_hash:
            self.hashes[item.content_hash] = item.url
        self.pages += 1
        self.seen.update(outcome.aliases)
        for link in outcome.links:
            if link not in self.seen:
                if len(self.seen) >= MAX_SEEN_URLS:
                    break
                self.seen.add(link)
                found[link] = None
        return item

    async def _process(self, url: str, depth: int) -> _Outcome:
        leaf = depth >= self.options.crawl_depth
        fetched = await self.fetcher.fetch(url, depth, conditional=leaf)
        if isinstance(fetched, Skipped):
            return _Outcome(fetched)
        if depth == 0 and self.default_domains:
            self.domains.add(_site_domain(host_of(fetched.url)))
        fetched_at = _now()
        if fetched.status == 304:
            sent = fetched.sent or Validators()
            page = Page(
                url=fetched.url,
                title=None,
                text="",
                fetched_at=fetched_at,
                depth=depth,
                content_type=fetched.content_type,
                etag=fetched.etag,
                last_modified=fetched.last_modified,
                content_hash=sent.content_hash or "",
                not_modified=True,
                status=304,
            )
            return _Outcome(page, aliases=(fetched.url,))
        try:
            loop = asyncio.get_running_loop()
            extracted = await loop.run_in_executor(
                self.executor, _extract, fetched, 0 if leaf else MAX_LINKS_PER_PAGE
            )
        except ImportError:
            return _Outcome(Skipped(url, "pdf support not installed", "install pypdf to read PDFs"))
        except Exception as exc:  # noqa: BLE001 - a parser failure on one page must not end the crawl
            return _Outcome(Skipped(url, "error", f"extraction failed: {type(exc).__name__}: {exc}"))
        page_url = fetched.url
        if extracted.canonical and in_domains(host_of(extracted.canonical), self.domains):
            page_url = extracted.canonical
        content_hash = hashlib.sha256(f"{extracted.title or ''}\n{extracted.text}".encode()).hexdigest()
        known_hashes: dict[str, str | None] = {}
        for candidate in dict.fromkeys((page_url, fetched.url, url)):
            validators = await self.fetcher.known(candidate)
            known_hashes[candidate] = validators.content_hash if validators is not None else None
        page = Page(
            url=page_url,
            title=extracted.title,
            text=extracted.text,
            fetched_at=fetched_at,
            depth=depth,
            content_type=fetched.content_type,
            etag=fetched.etag,
            last_modified=fetched.last_modified,
            content_hash=content_hash,
            not_modified=False,  # settled by _accept, once the page's URL is
            status=fetched.status,
        )
        return _Outcome(page, extracted.links, (fetched.url, page_url), known_hashes)
