"""`crawl_state`: per knowledge base, the validators of each crawled URL (ETag, Last-Modified, text hash);
`crawl_sources`: the start URLs and options of its URL inserts, which `kb_recrawl` crawls again."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.storage.db import TextArray


@dataclass(frozen=True, slots=True)
class CrawledUrl:
    url: str
    etag: str | None
    last_modified: str | None
    content_hash: str | None
    fetched_at: str | None = None  # ISO 8601, as the crawler records it


async def load(conn: AsyncConnection, kb_id: int) -> dict[str, CrawledUrl]:
    rows = await conn.execute(
        text("SELECT url, etag, last_modified, content_hash FROM crawl_state WHERE kb_id = :kb"),
        {"kb": kb_id},
    )
    return {r.url: CrawledUrl(r.url, r.etag, r.last_modified, r.content_hash) for r in rows}


async def save(conn: AsyncConnection, kb_id: int, urls: Iterable[CrawledUrl]) -> None:
    params = [
        {
            "kb": kb_id,
            "url": u.url,
            "etag": u.etag,
            "lm": u.last_modified,
            "hash": u.content_hash,
            "at": u.fetched_at,
        }
        for u in urls
    ]
    if not params:
        return
    await conn.execute(
        text(
            "INSERT INTO crawl_state (kb_id, url, etag, last_modified, content_hash, fetched_at) "
            "VALUES (:kb, :url, :etag, :lm, :hash, :at) ON CONFLICT (kb_id, url) DO UPDATE SET "
            "etag = EXCLUDED.etag, last_modified = EXCLUDED.last_modified, "
            "content_hash = EXCLUDED.content_hash, fetched_at = EXCLUDED.fetched_at"
        ),
        params,
    )


async def forget(conn: AsyncConnection, kb_id: int, urls: list[str]) -> None:
    """Drop what was kept of `urls` (pages gone from their site)."""
    if urls:
        await conn.execute(
            text("DELETE FROM crawl_state WHERE kb_id = :kb AND url = ANY(:urls)"),
            {"kb": kb_id, "urls": TextArray(urls)},
        )


# --- crawl_sources: the start URLs and options of a knowledge base's URL inserts (`kb_recrawl`) ------------


@dataclass(frozen=True, slots=True)
class CrawlSource:
    """One URL insert as it was asked for: its start URLs, `crawl_depth`, `limit` and `filters`."""

    urls: list[str]
    crawl_depth: int | None = None
    limit: int | None = None
    filters: Any = None


def source_key(urls: Iterable[str]) -> str:
    """A source's key: its set of start URLs (an insert of the same URLs replaces the source's options). The
    same text as migration 0020 computes for the sources it takes from earlier jobs."""
    return hashlib.md5("\n".join(sorted(set(urls))).encode()).hexdigest()


async def save_source(conn: AsyncConnection, kb_id: int, source: CrawlSource) -> None:
    await conn.execute(
        text(
            "INSERT INTO crawl_sources (kb_id, key, urls, crawl_depth, page_limit, filters) VALUES "
            "(:kb, :key, CAST(:urls AS jsonb), :depth, :limit, CAST(:filters AS jsonb)) "
            "ON CONFLICT (kb_id, key) DO UPDATE SET urls = EXCLUDED.urls, crawl_depth = EXCLUDED.crawl_depth, "
            "page_limit = EXCLUDED.page_limit, filters = EXCLUDED.filters, updated_at = now()"
        ),
        {
            "kb": kb_id,
            "key": source_key(source.urls),
            "urls": orjson.dumps(source.urls).decode(),
            "depth": source.crawl_depth,
            "limit": source.limit,
            "filters": orjson.dumps(source.filters).decode(),
        },
    )


async def sources(conn: AsyncConnection, kb_id: int) -> list[CrawlSource]:
    """The knowledge base's URL sources, oldest first."""
    rows = await conn.execute(
        text(
            "SELECT urls, crawl_depth, page_limit, filters FROM crawl_sources WHERE kb_id = :kb "
            "ORDER BY created_at, key"
        ),
        {"kb": kb_id},
    )
    return [CrawlSource(list(r.urls), r.crawl_depth, r.page_limit, r.filters) for r in rows]


async def has_sources(conn: AsyncConnection, kb_id: int) -> bool:
    found = await conn.scalar(
        text("SELECT EXISTS (SELECT 1 FROM crawl_sources WHERE kb_id = :kb)"), {"kb": kb_id}
    )
    return bool(found)
