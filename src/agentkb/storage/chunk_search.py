"""Retrieval SQL over one chunk table: vector top-k (HNSW over the indexed rows, exact over the unindexed
delta: see storage.vector_index; one exact scan where nothing is indexed; or among candidates ranked in the
process, kb.vectors), given ids (BM25's candidates), a filtered listing, and the KB's version stamp, all in
one statement (one round trip; the delta's watermark is read through a short per-process cache). And the
load of a small table's vectors for kb.vectors."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.storage import vector_index
from agentkb.storage.chunks import vector_expr
from agentkb.storage.db import (
    EF_DEFAULT_INFO,
    EF_SEARCH_INFO,
    HNSW_EF_SEARCH,
    MAX_EF_SEARCH,
    TRANSACTION_POOLED_INFO,
    TextArray,
    fetch_tuples,
    session_settings,
)

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, slots=True)
class Row:
    chunk_id: str
    doc_id: str
    content: str
    metadata: dict[str, Any]
    distance: float | None


@dataclass(frozen=True, slots=True)
class Retrieval:
    """What one search asks of a chunk table, answered in one statement: the vector top-k, the given
    chunk ids (BM25's candidates), or a filtered listing; and always the KB's version
    (`knowledge_bases.updated_at`, None when the KB is gone), read in the same snapshot."""

    kb_id: int
    table: str
    dim: int
    where: str = "TRUE"
    params: dict[str, Any] = field(default_factory=dict)
    query: np.ndarray | None = None
    vector_k: int = 0
    ids: list[str] | None = None
    listing: tuple[int, int] | None = None  # (limit, offset)
    watermark: int = 0  # the HNSW index holds the rows with seq <= watermark; the rest is scanned exactly
    ef_search: int | None = None  # the HNSW candidate list (None: the pool's session default); >= vector_k
    # the vector top-k is taken among these chunks (ranked in the process: kb.vectors), unless the table's
    # index holds rows (a merge or CREATE INDEX since they were loaded): then the index answers as ever
    near: list[str] | None = None


@dataclass(slots=True)
class Retrieved:
    version: datetime | None
    vector: list[Row] = field(default_factory=list)
    ids: list[Row] = field(default_factory=list)
    listing: list[Row] = field(default_factory=list)
    in_process: bool = False  # the vector side was ranked in the process (`near`), not by a scan or index


def _query_vector(dim: int) -> str:
    return ":qvec" if vector_expr(dim) == "embedding" else f"CAST(CAST(:qvec AS vector) AS halfvec({dim}))"


_COLUMNS = "chunk_id, doc_id, content, metadata"


def _statement(r: Retrieval, ef: int) -> str:
    """`ef`: the `hnsw.ef_search` the statement runs under. PostgreSQL may keep one generic plan of a
    prepared statement, and whether that plan searches the HNSW index or scans the table depends on the
    breadth it was planned under: the breadth is written in the text (a comment), so that each breadth gets
    a plan of its own (as the watermark, also in the text, gives each extent of the index its own)."""
    t, where = r.table, r.where
    distance = f"{vector_expr(r.dim)} <=> {_query_vector(r.dim)}"
    parts = [
        "SELECT 'kb' AS side, NULL::text AS chunk_id, NULL::text AS doc_id, NULL::text AS content, "
        "NULL::jsonb AS metadata, NULL::float8 AS distance, 0::bigint AS ord, "
        "(SELECT updated_at FROM knowledge_bases WHERE id = :kb_id) AS version"
    ]
    if r.query is not None and r.vector_k:
        # the index's top-k over seq <= W, the delta's exact top-k (OFFSET 0 keeps that scan off the index),
        # the best k of both, as (chunk_id, distance) pairs: an exact scan (the delta, or a table the
        # planner scans rather than search its index) then carries narrow rows, and only the k winners'
        # content and metadata are read. k is written in the text, not bound, so that PostgreSQL can keep
        # one generic plan of the prepared statement instead of planning each search again.
        k, mark = int(r.vector_k), int(r.watermark)
        rows = f"SELECT chunk_id, {distance} AS distance FROM {t}"
        if r.near is not None:  # ranked in the process: PostgreSQL's distances order the candidates
            top = f"{rows} WHERE chunk_id = ANY(:near) AND ({where}) ORDER BY distance LIMIT {k}"
        elif mark > 0:
            top = (
                f"SELECT chunk_id, distance FROM (({rows} WHERE seq <= {mark} AND ({where}) ORDER BY distance "
                f"LIMIT {k}) UNION ALL (SELECT * FROM ({rows} WHERE seq > {mark} AND ({where}) OFFSET 0) delta "
                f"ORDER BY distance LIMIT {k})) u ORDER BY distance LIMIT {k}"
            )
        else:  # nothing indexed (a table below the merge's minimum): one exact scan of every row
            top = f"{rows} WHERE ({where}) ORDER BY distance LIMIT {k}"
        parts.append(
            "SELECT 'vector', c.chunk_id, c.doc_id, c.content, c.metadata, h.distance::float8, 0::bigint, "
            f"NULL::timestamptz FROM ({top}) h JOIN {t} c ON c.chunk_id = h.chunk_id"
        )
    if r.query is not None and r.ids:
        parts.append(
            f"SELECT 'ids', {_COLUMNS}, ({distance})::float8, 0::bigint, NULL::timestamptz "
            f"FROM {t} WHERE chunk_id = ANY(:ids) AND {where}"
        )
    if r.listing is not None:
        parts.append(
            f"SELECT * FROM (SELECT 'listing', {_COLUMNS}, NULL::float8, "
            f"row_number() OVER (ORDER BY doc_id, chunk_id), NULL::timestamptz FROM {t} WHERE {where} "
            "ORDER BY doc_id, chunk_id LIMIT :limit OFFSET :offset) l"
        )
    return f"/* ef_search {int(ef)} */ " + " UNION ALL ".join(parts)


def _by_distance(row: Row) -> float:
    """PostgreSQL's order: a NaN distance (to a zero vector) last."""
    d = row.distance or 0.0
    return math.inf if math.isnan(d) else d


async def _set_ef_search(conn: AsyncConnection, ef: int) -> None:
    await conn.execute(text("SELECT set_config('hnsw.ef_search', :ef, false)"), {"ef": str(ef)})


async def _autocommit(conn: AsyncConnection) -> bool:
    raw = await conn.get_raw_connection()
    return bool(raw.driver_connection.autocommit)  # type: ignore[union-attr]


async def retrieve(conn: AsyncConnection, r: Retrieval) -> Retrieved:
    """One round trip. The vector rows by distance (an iterative HNSW scan may return them slightly out of
    order), the id rows in `ids`' order, the listing rows in their SQL order."""
    params: dict[str, Any] = {**r.params, "kb_id": r.kb_id}
    if r.query is not None:
        params["qvec"] = r.query
    if r.ids:
        params["ids"] = TextArray(r.ids)
    if r.listing is not None:
        params["limit"], params["offset"] = r.listing
    if r.query is not None and r.vector_k:
        r = replace(r, watermark=await vector_index.watermark(conn, r.table))
        if r.watermark > 0 and r.near is not None:  # indexed since the vectors were loaded: the index answers
            r = replace(r, near=None)
    if r.near is not None:
        params["near"] = TextArray(r.near)
    # the pool's default breadth (storage.db), unless the KB asks for another list or the search for more
    # rows than it holds. The session keeps what was set last: on an autocommit connection a list set here
    # stays (the next search of that KB sets nothing); inside a transaction, which a rollback would undo, it
    # is set back after the statement.
    default_ef = int(conn.info.get(EF_DEFAULT_INFO, HNSW_EF_SEARCH))
    current_ef = int(conn.info.get(EF_SEARCH_INFO, default_ef))
    ef = min(max(r.ef_search or default_ef, r.vector_k), MAX_EF_SEARCH)
    restore: int | None = None
    if conn.info.get(TRANSACTION_POOLED_INFO):  # no session of our own: the settings go with the statement
        local = session_settings(ef) if r.query is not None else None
        rows = await fetch_tuples(conn, _statement(r, ef), params, local_settings=local)
        return _retrieved(r, rows)
    if r.query is not None and ef != current_ef:
        await _set_ef_search(conn, ef)
        if await _autocommit(conn):
            conn.info[EF_SEARCH_INFO] = ef
        else:
            restore = current_ef
    try:
        rows = await fetch_tuples(conn, _statement(r, ef), params)
    finally:
        if restore is not None:
            await _set_ef_search(conn, restore)
    return _retrieved(r, rows)


def _retrieved(r: Retrieval, rows: list[tuple[Any, ...]]) -> Retrieved:
    out = Retrieved(None, in_process=r.near is not None)
    ordered: dict[str, list[tuple[int, Row]]] = {"listing": []}
    for side, chunk_id, doc_id, content, metadata, distance, ord_, version in rows:
        if side == "kb":
            out.version = version
            continue
        row = Row(
            chunk_id,
            doc_id,
            content,
            metadata,
            None if distance is None else float(distance),
        )
        if side == "vector":
            out.vector.append(row)
        elif side == "ids":
            out.ids.append(row)
        else:
            ordered[side].append((int(ord_), row))
    out.vector.sort(key=_by_distance)
    if r.ids:
        found = {row.chunk_id: row for row in out.ids}
        out.ids = [found[c] for c in r.ids if c in found]
    out.listing = [row for _, row in sorted(ordered["listing"], key=lambda p: p[0])]
    return out


async def all_vectors(
    conn: AsyncConnection, kb_id: int, table: str, dim: int, limit: int
) -> tuple[datetime | None, list[str] | None, np.ndarray | None]:
    """The KB's version and its chunks' ids and vectors (float32, a row each), read in one snapshot; (version,
    None, None) when the table holds more than `limit` chunks or its HNSW index holds any (searched through
    the index), found before any vector is read (a one-time filter). The vectors come as one `bytea` of
    pgvector's binary format (`vector_send`: a 4-byte header, then big-endian float32s), in the order of the
    ids (two aggregates over the same rows)."""
    import numpy as np

    rows = await fetch_tuples(
        conn,
        f"WITH n AS (SELECT count(*) AS n FROM (SELECT 1 FROM {table} LIMIT :over) o), "
        f"w AS (SELECT coalesce(max(indexed_seq), 0) AS w FROM {vector_index.STATE} WHERE storage_table = :table) "
        "SELECT (SELECT updated_at FROM knowledge_bases WHERE id = :kb_id), (SELECT w FROM w), (SELECT n FROM n), "
        f"array_agg(chunk_id), string_agg(vector_send(embedding), ''::bytea) FROM {table} "
        "WHERE (SELECT n FROM n) <= :limit AND (SELECT w FROM w) = 0",
        {"kb_id": kb_id, "table": table, "limit": limit, "over": limit + 1},
        binary=True,
    )
    version, indexed, count, chunk_ids, blob = rows[0]
    if count > limit or (indexed or 0) > 0:
        return version, None, None
    if not count:
        return version, [], np.zeros((0, dim), dtype=np.float32)
    vectors = np.frombuffer(blob, dtype=">f4").reshape(len(chunk_ids), dim + 1)[:, 1:]
    return version, list(chunk_ids), vectors.astype(np.float32)


async def all_texts(conn: AsyncConnection, table: str) -> tuple[list[str], list[str]]:
    rows = (await conn.execute(text(f"SELECT chunk_id, content FROM {table} ORDER BY chunk_id"))).all()
    return [r.chunk_id for r in rows], [r.content for r in rows]


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
