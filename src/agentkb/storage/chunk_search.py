"""Retrieval SQL over one chunk table: vector top-k (HNSW), full-text top-k, and a filtered listing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.storage import vector_index
from agentkb.storage.chunks import vector_expr

MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search
EF_SEARCH = 100  # HNSW candidate list; recall@10 ≈ 0.99 at 100 k vectors


@dataclass(frozen=True, slots=True)
class Row:
    chunk_id: str
    doc_id: str
    content: str
    metadata: dict[str, Any]
    distance: float | None
    rank: float | None = None


def _query_vector(dim: int) -> str:
    return ":qvec" if vector_expr(dim) == "embedding" else f"CAST(CAST(:qvec AS vector) AS halfvec({dim}))"


async def vector_top_k(
    conn: AsyncConnection, table: str, dim: int, query: np.ndarray, k: int, where: str, params: dict[str, Any]
) -> list[Row]:
    ef = min(max(EF_SEARCH, k), MAX_EF_SEARCH)
    await conn.execute(text("SELECT set_config('hnsw.ef_search', :ef, true)"), {"ef": str(ef)})
    if where != "TRUE" or k > ef:  # keep scanning the graph until enough rows pass (pgvector ≥ 0.8)
        await conn.execute(text("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)"))
    distance = f"{vector_expr(dim)} <=> {_query_vector(dim)}"
    # the HNSW index holds the rows up to the watermark; the delta above it is scanned exactly (OFFSET 0
    # keeps that scan off any index) — see storage.vector_index
    mark = await vector_index.watermark(conn, table)
    columns = f"chunk_id, doc_id, content, metadata, {distance} AS distance"
    rows = await conn.execute(
        text(
            f"SELECT * FROM ((SELECT {columns} FROM {table} WHERE seq <= {mark} AND ({where}) "
            f"ORDER BY {distance} LIMIT :k) UNION ALL (SELECT * FROM (SELECT {columns} FROM {table} "
            f"WHERE seq > {mark} AND ({where}) OFFSET 0) delta ORDER BY distance LIMIT :k)) hits "
            "ORDER BY distance LIMIT :k"
        ),
        {**params, "qvec": query, "k": k},
    )
    return [Row(r.chunk_id, r.doc_id, r.content, r.metadata, float(r.distance)) for r in rows]


async def text_top_k(
    conn: AsyncConnection,
    table: str,
    dim: int,
    query_text: str,
    query: np.ndarray,
    k: int,
    where: str,
    params: dict[str, Any],
) -> list[Row]:
    """Chunks matching ANY of the query's terms (English stemming, stop words dropped), best first by
    `ts_rank_cd`; each with its vector distance too, so fused hits all carry one."""
    distance = f"{vector_expr(dim)} <=> {_query_vector(dim)}"
    rows = await conn.execute(
        text(
            "WITH q AS (SELECT CAST(replace(CAST(plainto_tsquery('english', :qtext) AS text), '&', '|') "
            "AS tsquery) AS q) "
            f"SELECT chunk_id, doc_id, content, metadata, ts_rank_cd(tsv, q.q) AS rank, {distance} AS distance "
            f"FROM {table}, q WHERE tsv @@ q.q AND {where} ORDER BY rank DESC, chunk_id LIMIT :k"
        ),
        {**params, "qtext": query_text, "qvec": query, "k": k},
    )
    return [Row(r.chunk_id, r.doc_id, r.content, r.metadata, float(r.distance), float(r.rank)) for r in rows]


async def rows_by_ids(
    conn: AsyncConnection,
    table: str,
    dim: int,
    chunk_ids: list[str],
    query: np.ndarray,
    where: str,
    params: dict[str, Any],
) -> list[Row]:
    """The given chunks that pass `where`, in the given order, with their vector distances."""
    if not chunk_ids:
        return []
    distance = f"{vector_expr(dim)} <=> {_query_vector(dim)}"
    rows = await conn.execute(
        text(
            f"SELECT chunk_id, doc_id, content, metadata, {distance} AS distance FROM {table} "
            f"WHERE chunk_id = ANY(:ids) AND {where}"
        ),
        {**params, "ids": chunk_ids, "qvec": query},
    )
    found = {r.chunk_id: Row(r.chunk_id, r.doc_id, r.content, r.metadata, float(r.distance)) for r in rows}
    return [found[c] for c in chunk_ids if c in found]


async def all_texts(conn: AsyncConnection, table: str) -> tuple[list[str], list[str]]:
    rows = (await conn.execute(text(f"SELECT chunk_id, content FROM {table} ORDER BY chunk_id"))).all()
    return [r.chunk_id for r in rows], [r.content for r in rows]


async def listing(
    conn: AsyncConnection, table: str, limit: int, offset: int, where: str, params: dict[str, Any]
) -> list[Row]:
    rows = await conn.execute(
        text(
            f"SELECT chunk_id, doc_id, content, metadata FROM {table} WHERE {where} "
            "ORDER BY doc_id, chunk_id LIMIT :limit OFFSET :offset"
        ),
        {**params, "limit": limit, "offset": offset},
    )
    return [Row(r.chunk_id, r.doc_id, r.content, r.metadata, None) for r in rows]


async def delete_where(
    conn: AsyncConnection, table: str, where: str, params: dict[str, Any]
) -> tuple[int, int]:
    """Delete the chunks matching `where`; (documents, chunks) deleted."""
    rows = await conn.execute(text(f"DELETE FROM {table} WHERE {where} RETURNING doc_id"), params)
    doc_ids = [r.doc_id for r in rows]
    return len(set(doc_ids)), len(doc_ids)


async def metadata_keys(conn: AsyncConnection, table: str) -> list[str]:
    """The metadata keys the chunks carry, MindsDB's system keys (`_…`) left out; sorted."""
    rows = await conn.execute(
        text(
            f"SELECT DISTINCT k FROM {table}, LATERAL jsonb_object_keys(metadata) AS k "
            "WHERE jsonb_typeof(metadata) = 'object' AND left(k, 1) <> '_' ORDER BY k"
        )
    )
    return [r.k for r in rows]
