"""KB insert `urls`: crawled pages as documents (`_source` = the URL), recrawled incrementally.

Validators of each URL (ETag, Last-Modified, content hash) are kept per knowledge base in `crawl_state`,
written in the insert's own transaction; a recrawl sends conditional requests and an unchanged page
costs nothing: a 304, or a page whose text hashes as before, leaves its document as it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import httpcore

from agentkb.errors import BadRequest
from agentkb.ingest.crawl.crawler import CrawlOptions, Page, Resolver, Validators, check_target, crawl
from agentkb.ingest.request import InsertInput, SourceRun
from agentkb.kb.documents import Document
from agentkb.patterns import compile_regex
from agentkb.storage import crawl_state

PAGE_BATCH = 32
DEFAULT_DEPTH = 1
SKIP_REASONS = {"robots", "off-domain", "pattern", "type", "duplicate"}  # not failures: the crawl chose


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
        options = _options(run.given, self.allow_private)
        progress = run.progress
        known = {
            url: Validators(c.etag, c.last_modified, c.content_hash)
            for url, c in (await crawl_state.load(run.conn, run.kb.id)).items()
        }

        async def lookup(url: str) -> Validators | None:
            return known.get(url)

        seen: list[Page] = []
        batch: list[Document] = []
        pages = crawl(options, lookup, resolver=self.resolver, network=self.network)
        async with aclosing(pages):  # closes the crawl (its client, its tasks) if this insert stops early
            async for item in pages:
                if isinstance(item, Page):
                    progress.add_items(1)
                    seen.append(item)
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
                elif item.reason in SKIP_REASONS:
                    progress.count("items_skipped")
                else:
                    progress.item_failed(item.url, f"{item.reason}: {item.detail}".rstrip(": "))
        if batch:
            yield batch
        await crawl_state.save(
            run.conn,
            run.kb.id,
            (
                crawl_state.CrawledUrl(p.url, p.etag, p.last_modified, p.content_hash, p.fetched_at)
                for p in seen
            ),
        )
