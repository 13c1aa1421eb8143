"""KB insert `urls`: crawled pages as documents (`_source` = the URL), recrawled incrementally.

Validators of each URL (ETag, Last-Modified, content hash) are kept per knowledge base in `crawl_state`,
written in the insert's own transaction; a recrawl sends conditional requests and an unchanged page
costs nothing: a 304, or a page whose text hashes as before, leaves its document as it is.

Each URL insert is kept as a source of the knowledge base (`crawl_state.save_source`: its start URLs and
options); `SELECT kb_recrawl('<kb>')` (an insert with `recrawl`) crawls every source again the same way, and
deletes the documents of the pages gone from their site (`Reach`), in the insert's transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from agentkb.destinations import Resolver
from agentkb.errors import BadRequest
from agentkb.ingest.crawl.types import CrawlOptions, Page, Skipped, Validators
from agentkb.ingest.crawl.urls import check_target
from agentkb.ingest.request import InsertInput, Progress, SourceRun
from agentkb.kb.documents import Document
from agentkb.patterns import compile_regex
from agentkb.storage import chunks, crawl_state

if TYPE_CHECKING:  # the crawler (httpx, httpcore) is imported by the first crawl
    import httpcore

    from agentkb.ingest.crawl.fetch import Known

PAGE_BATCH = 32
DEFAULT_DEPTH = 1
SKIP_REASONS = {"robots", "off-domain", "pattern", "type", "duplicate"}  # not failures: the crawl chose
GONE = {"http 404", "http 410"}  # a page a recrawl finds gone from its site


def _options(given: InsertInput, allow_private: bool) -> CrawlOptions:
    urls = given.urls
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) and u.strip() for u in urls):
        raise BadRequest("'urls' must be a non-empty list of URL strings", title="Invalid urls")
    for name in ("limit", "crawl_depth"):
        value = getattr(given, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise BadRequest(f"'{name}' must be a non-negative integer", title="Invalid urls")
    if given.limit == 0:
        raise BadRequest("'limit' must be at least 1", title="Invalid urls")
    allowed: list[str] | None = None
    patterns: list[str] | None = None
    filters = given.filters
    if isinstance(filters, dict):
        allowed = filters.get("allowed_domains")
        if allowed is not None and (
            not isinstance(allowed, list) or not all(isinstance(d, str) for d in allowed)
        ):
            raise BadRequest("'filters.allowed_domains' must be a list of domain names", title="Invalid urls")
    elif isinstance(filters, list):  # the MindsDB SDK's form: regexes the URLs must match
        if not all(isinstance(p, str) for p in filters):
            raise BadRequest("'filters' must be a list of regular expressions", title="Invalid urls")
        for i, pattern in enumerate(filters):  # refused here, before a job is queued
            compile_regex(pattern, f"filters[{i}]")
        patterns = filters or None
    elif filters is not None:
        raise BadRequest(
            "'filters' must be {\"allowed_domains\": [...]} or a list of URL regexes", title="Invalid urls"
        )
    return CrawlOptions(
        urls=[u.strip() for u in urls],
        crawl_depth=DEFAULT_DEPTH if given.crawl_depth is None else given.crawl_depth,
        limit=given.limit,
        allowed_domains=allowed or None,
        url_patterns=patterns,
        allow_private=allow_private,
    )


def page_document(page: Page) -> Document:
    metadata: dict[str, Any] = {
        "url": page.url,
        "title": page.title,
        "fetched_at": page.fetched_at,
        "depth": page.depth,
        "content_type": page.content_type,
    }
    return Document(
        doc_id=page.url,
        original_id=page.url,
        content_column="content",
        content=page.text,
        metadata=metadata,
        source=page.url,
    )


class UrlSource:
    """`resolver` and `network` (see `crawl`) are for tests; by default the system resolver and real
    connections (to the checked addresses only)."""

    def __init__(
        self,
        allow_private: bool,
        *,
        resolver: Resolver | None = None,
        network: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.allow_private = allow_private
        self.resolver = resolver
        self.network = network

    async def validate(self, given: InsertInput) -> dict[str, Any]:
        options = _options(given, self.allow_private)
        for url in options.urls:  # refuse bad or private start URLs before a job exists (400)
            await asyncio.to_thread(check_target, url, self.allow_private, self.resolver)
        return {
            "urls": options.urls,
            "limit": given.limit,
            "crawl_depth": given.crawl_depth,
            "filters": given.filters,
        }

    async def documents(self, run: SourceRun) -> AsyncIterator[list[Document]]:
        """The pages of the insert's `urls`, or with `recrawl` those of every URL source the knowledge base
        keeps (`crawl_state.sources`), each crawled as its last insert asked; then what the crawl saw of each
        page is kept for the next one, and a URL insert is kept as a source (a recrawl deletes the pages
        that are gone instead, see `Reach`)."""
        known = {
            url: Validators(c.etag, c.last_modified, c.content_hash)
            for url, c in (await crawl_state.load(run.conn, run.kb.id)).items()
        }

        async def lookup(url: str) -> Validators | None:
            return known.get(url)

        reach: Reach | None = None
        if run.given.recrawl:
            stored = await crawl_state.sources(run.conn, run.kb.id)
            given = [
                InsertInput(urls=s.urls, limit=s.limit, crawl_depth=s.crawl_depth, filters=s.filters)
                for s in stored
            ]
            reach = Reach(set(known))
        else:
            given = [run.given]
        seen: dict[str, Page] = {}
        for source in given:
            options = _options(source, self.allow_private)
            async for batch in self._pages(options, lookup, run.progress, seen, reach):
                yield batch
        await crawl_state.save(
            run.conn,
            run.kb.id,
            (
                crawl_state.CrawledUrl(p.url, p.etag, p.last_modified, p.content_hash, p.fetched_at)
                for p in seen.values()
            ),
        )
        if reach is None:
            asked = run.given
            urls = _options(asked, self.allow_private).urls
            kept = crawl_state.CrawlSource(urls, asked.crawl_depth, asked.limit, asked.filters)
            await crawl_state.save_source(run.conn, run.kb.id, kept)
            return
        removed = reach.removed()
        run.progress.removed(*await chunks.delete_documents(run.conn, run.kb.storage_table, removed))
        await crawl_state.forget(run.conn, run.kb.id, removed)

    async def _pages(
        self,
        options: CrawlOptions,
        lookup: Known,
        progress: Progress,
        seen: dict[str, Page],
        reach: Reach | None,
    ) -> AsyncIterator[list[Document]]:
        """One crawl's new and changed pages as documents; every page it fetched goes in `seen` (a page an
        earlier crawl of this insert fetched is left out)."""
        batch: list[Document] = []
        pages = items = 0
        from agentkb.ingest.crawl.crawler import crawl

        stream = crawl(options, lookup, resolver=self.resolver, network=self.network)
        async with aclosing(stream):  # closes the crawl (its client, its tasks) if this insert stops early
            async for item in stream:
                items += 1
                if isinstance(item, Page):
                    pages += 1
                    if reach is not None:
                        reach.page(item.url)
                    if item.url in seen:  # another source of this recrawl fetched it
                        progress.count("items_skipped")
                        continue
                    progress.add_items(1)
                    seen[item.url] = item
                    if item.not_modified:  # 304, or the same text as last time: its document stays as it is
                        progress.count("items_skipped_unchanged")
                        continue
                    if not item.text.strip():
                        progress.item_failed(item.url, "no text could be extracted")
                        continue
                    batch.append(page_document(item))
                    if len(batch) >= PAGE_BATCH:
                        yield batch
                        batch = []
                elif reach is not None and reach.skipped(item):
                    progress.count("items_gone")
                elif item.reason in SKIP_REASONS:
                    progress.count("items_skipped")
                else:
                    progress.item_failed(item.url, f"{item.reason}: {item.detail}".rstrip(": "))
        if batch:
            yield batch
        if reach is not None:
            reach.ended(options, pages, items)


class Reach:
    """What a recrawl saw of the pages crawled before it (`known`): those it reached, those that now answer
    404 or 410 (gone), and whether every crawl ran to its end — neither cut short by its `limit` (nor by the
    crawler's cap on the URLs it tracks) nor meeting a failure (a timeout, a 5xx, a refused address: a
    page that failed hides the links it holds). Only then is a known page the crawls no longer reach gone
    too; otherwise only the 404 and 410 pages are."""

    def __init__(self, known: set[str]) -> None:
        self.known = known
        self.fetched: set[str] = set()  # pages fetched
        self.reached: set[str] = set()  # pages fetched, and URLs skipped or failed
        self.gone: set[str] = set()
        self.complete = True

    def page(self, url: str) -> None:
        self.fetched.add(url)
        self.reached.add(url)

    def skipped(self, item: Skipped) -> bool:
        """Note a URL the crawl did not fetch; True when it is a known page now gone."""
        self.reached.add(item.url)
        if item.reason in GONE:
            if item.url in self.known:
                self.gone.add(item.url)
                return True
        elif item.reason not in SKIP_REASONS:
            self.complete = False
        return False

    def ended(self, options: CrawlOptions, pages: int, items: int) -> None:
        """One crawl ended, having yielded `pages` pages and `items` pages and skipped URLs."""
        from agentkb.ingest.crawl.crawler import MAX_SEEN_URLS, page_cap

        if pages >= page_cap(options) or items >= MAX_SEEN_URLS:
            self.complete = False

    def removed(self) -> list[str]:
        """The known pages to delete: gone, or (after complete crawls) no longer reached."""
        removed = self.gone | (self.known - self.reached if self.complete else set())
        return sorted(removed - self.fetched)
