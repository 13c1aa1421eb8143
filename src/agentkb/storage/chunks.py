"""DDL of a knowledge base's chunk table: vectors (pgvector HNSW, cosine) and full text (tsvector, GIN)."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

# pgvector indexes `vector` up to 2,000 dimensions and `halfvec` up to 4,000.
MAX_VECTOR_INDEX_DIM = 2000
MAX_DIM = 4000


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
        f"CREATE INDEX {table}_hnsw ON {table} USING hnsw ({vector_expr(dim)} {distance_ops(dim)})",
        f"CREATE INDEX {table}_tsv ON {table} USING gin (tsv)",
        f"CREATE INDEX {table}_doc ON {table} (doc_id)",
        f"CREATE INDEX {table}_meta ON {table} USING gin (metadata jsonb_path_ops)",
    ):
        await conn.execute(text(statement))


async def drop_chunk_table(conn: AsyncConnection, table: str) -> None:
    await conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
