"""`crawl_state`: per knowledge base, the validators of each crawled URL (ETag, Last-Modified, text hash)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection


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
