"""DDL of a knowledge base's chunk table: vectors (pgvector HNSW, cosine) and full text (tsvector, GIN)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

# pgvector indexes `vector` up to 2,000 dimensions and `halfvec` up to 4,000.
MAX_VECTOR_INDEX_DIM = 2000
MAX_DIM = 4000
HNSW_OPTIONS = ("m", "ef_construction")


def table_name(kb_id: int) -> str:
    return f"kb_chunks_{kb_id}"


def vector_expr(dim: int) -> str:
    """The indexed expression: the vector itself, or its half-precision cast above 2,000 dimensions."""
    return "embedding" if dim <= MAX_VECTOR_INDEX_DIM else f"(embedding::halfvec({dim}))"


def distance_ops(dim: int) -> str:
    return "vector_cosine_ops" if dim <= MAX_VECTOR_INDEX_DIM else "halfvec_cosine_ops"


async def create_chunk_table(conn: AsyncConnection, table: str, dim: int) -> None:
    if not 0 < dim <= MAX_DIM:
        raise ValueError(f"vector dimension {dim} is outside 1..{MAX_DIM}")
    for statement in (
        f"""CREATE TABLE {table} (
            chunk_id text PRIMARY KEY,
            doc_id text NOT NULL,
            content text NOT NULL,
            content_hash text NOT NULL,
            metadata jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            embedding vector({dim}) NOT NULL,
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
            updated_at timestamptz NOT NULL DEFAULT now()
        )""",
        _hnsw_index_sql(table, dim),
        f"CREATE INDEX {table}_tsv ON {table} USING gin (tsv)",
        f"CREATE INDEX {table}_doc ON {table} (doc_id)",
        f"CREATE INDEX {table}_hash ON {table} (content_hash)",
        f"CREATE INDEX {table}_meta ON {table} USING gin (metadata jsonb_path_ops)",
    ):
        await conn.execute(text(statement))


def _hnsw_index_sql(table: str, dim: int, options: Mapping[str, int] | None = None) -> str:
    """`options`: pgvector's HNSW build parameters `m` and `ef_construction` (pgvector's defaults if absent)."""
    given = {k: int(v) for k, v in (options or {}).items() if k in HNSW_OPTIONS}
    storage = f" WITH ({', '.join(f'{k} = {v}' for k, v in given.items())})" if given else ""
    return (
        f"CREATE INDEX {table}_hnsw ON {table} USING hnsw ({vector_expr(dim)} {distance_ops(dim)}){storage}"
    )


async def drop_vector_index(conn: AsyncConnection, table: str) -> None:
    """For a bulk load into an empty table: building HNSW once at the end is several times faster than
    growing it row by row. Transactional: a rollback brings the index back."""
    await conn.execute(text(f"DROP INDEX IF EXISTS {table}_hnsw"))


async def build_vector_index(
    conn: AsyncConnection, table: str, dim: int, options: Mapping[str, int] | None = None
) -> None:
    await conn.execute(text("SET LOCAL maintenance_work_mem = '256MB'"))
    await conn.execute(text(_hnsw_index_sql(table, dim, options)))


async def rebuild_vector_index(
    conn: AsyncConnection, table: str, dim: int, options: Mapping[str, int] | None
) -> None:
    """`CREATE INDEX ON KNOWLEDGE_BASE`: REINDEX the HNSW index as it is (`options` None), or build it again
    with new parameters, in the caller's transaction. The table's searches and writes wait meanwhile."""
    exists = await conn.scalar(text("SELECT to_regclass(:name) IS NOT NULL"), {"name": f"{table}_hnsw"})
    if options is None and exists:
        await conn.execute(text("SET LOCAL maintenance_work_mem = '256MB'"))
        await conn.execute(text(f"REINDEX INDEX {table}_hnsw"))
        return
    await drop_vector_index(conn, table)
    await build_vector_index(conn, table, dim, options)


async def drop_chunk_table(conn: AsyncConnection, table: str) -> None:
    await conn.execute(text(f"DROP TABLE IF EXISTS {table}"))


@dataclass(frozen=True, slots=True)
class StoredChunk:
    chunk_id: str
    doc_id: str
    content_hash: str
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ChunkWrite:
    chunk_id: str
    doc_id: str
    content: str
    content_hash: str
    metadata: dict[str, Any]
    embedding: np.ndarray


async def chunks_of_documents(conn: AsyncConnection, table: str, doc_ids: list[str]) -> list[StoredChunk]:
    rows = await conn.execute(
        text(f"SELECT chunk_id, doc_id, content_hash, metadata FROM {table} WHERE doc_id = ANY(:ids)"),
        {"ids": doc_ids},
    )
    return [StoredChunk(r.chunk_id, r.doc_id, r.content_hash, r.metadata) for r in rows]


async def embeddings_by_hash(conn: AsyncConnection, table: str, hashes: list[str]) -> dict[str, np.ndarray]:
    """Stored vectors of chunks with these content hashes (any document): reused instead of re-embedding."""
    if not hashes:
        return {}
    rows = await conn.execute(
        text(
            f"SELECT DISTINCT ON (content_hash) content_hash, embedding FROM {table} "
            "WHERE content_hash = ANY(:hashes)"
        ),
        {"hashes": hashes},
    )
    return {r.content_hash: r.embedding for r in rows}


async def lock_documents(conn: AsyncConnection, kb_id: int, doc_ids: list[str]) -> None:
    """Serialise concurrent inserts of the same documents (transaction-scoped advisory locks, in order)."""
    await conn.execute(
        text(
            "SELECT pg_advisory_xact_lock(:kb, hashtext(d)) FROM unnest(CAST(:ids AS text[])) AS d ORDER BY d"
        ),
        {"kb": kb_id, "ids": doc_ids},
    )


async def get_chunk(conn: AsyncConnection, table: str, chunk_id: str) -> ChunkWrite | None:
    row = (
        await conn.execute(
            text(
                f"SELECT chunk_id, doc_id, content, content_hash, metadata, embedding FROM {table} "
                "WHERE chunk_id = :id"
            ),
            {"id": chunk_id},
        )
    ).first()
    if row is None:
        return None
    return ChunkWrite(row.chunk_id, row.doc_id, row.content, row.content_hash, row.metadata, row.embedding)


async def has_chunks(conn: AsyncConnection, table: str) -> bool:
    return bool(await conn.scalar(text(f"SELECT EXISTS (SELECT 1 FROM {table})")))


async def delete_other_chunks(conn: AsyncConnection, table: str, doc_ids: list[str], keep: list[str]) -> None:
    """Drop the chunks of `doc_ids` that are not in `keep` (a document that got shorter)."""
    await conn.execute(
        text(f"DELETE FROM {table} WHERE doc_id = ANY(:docs) AND NOT (chunk_id = ANY(:keep))"),
        {"docs": doc_ids, "keep": keep},
    )


async def delete_chunks(conn: AsyncConnection, table: str, chunk_ids: list[str]) -> None:
    if chunk_ids:
        await conn.execute(text(f"DELETE FROM {table} WHERE chunk_id = ANY(:ids)"), {"ids": chunk_ids})


async def upsert_chunks(conn: AsyncConnection, table: str, writes: list[ChunkWrite]) -> None:
    if not writes:
        return
    await conn.execute(
        text(
            f"INSERT INTO {table} (chunk_id, doc_id, content, content_hash, metadata, embedding, updated_at) "
            "VALUES (:chunk_id, :doc_id, :content, :content_hash, CAST(:metadata AS jsonb), :embedding, now()) "
            "ON CONFLICT (chunk_id) DO UPDATE SET doc_id = EXCLUDED.doc_id, content = EXCLUDED.content, "
            "content_hash = EXCLUDED.content_hash, metadata = EXCLUDED.metadata, "
            "embedding = EXCLUDED.embedding, updated_at = now()"
        ),
        [
            {
                "chunk_id": w.chunk_id,
                "doc_id": w.doc_id,
                "content": w.content,
                "content_hash": w.content_hash,
                "metadata": orjson.dumps(w.metadata).decode(),
                "embedding": w.embedding,
            }
            for w in writes
        ],
    )


async def counts(conn: AsyncConnection, table: str) -> tuple[int, int]:
    """(documents, chunks)."""
    row = (
        await conn.execute(text(f"SELECT count(DISTINCT doc_id) AS docs, count(*) AS chunks FROM {table}"))
    ).one()
    return int(row.docs), int(row.chunks)
