"""`chunk_contexts`: the contexts an LLM wrote for chunks of knowledge bases with contextual preprocessing, by
cache key (`kb.contextual.cache_key`)."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.storage.db import TextArray


async def get_many(conn: AsyncConnection, kb_id: int, keys: list[str]) -> dict[str, str]:
    """The stored contexts among `keys`."""
    if not keys:
        return {}
    rows = await conn.execute(
        text("SELECT key, context FROM chunk_contexts WHERE kb_id = :kb AND key = ANY(:keys)"),
        {"kb": kb_id, "keys": TextArray(keys)},
    )
    return {r.key: r.context for r in rows}


async def put_many(conn: AsyncConnection, kb_id: int, contexts: Mapping[str, str]) -> None:
    """Store contexts (a key stored already keeps its context: the same prompt's answer)."""
    if contexts:
        await conn.execute(
            text(
                "INSERT INTO chunk_contexts (kb_id, key, context) "
                "SELECT :kb, k, c FROM unnest(CAST(:keys AS text[]), CAST(:contexts AS text[])) AS t (k, c) "
                "ON CONFLICT DO NOTHING"
            ),
            {"kb": kb_id, "keys": TextArray(list(contexts)), "contexts": TextArray(list(contexts.values()))},
        )


async def delete_for_kb(conn: AsyncConnection, kb_id: int) -> None:
    await conn.execute(text("DELETE FROM chunk_contexts WHERE kb_id = :kb"), {"kb": kb_id})
