"""Chunk tables lose their generated full-text column (`tsv`, and its GIN index with it): hybrid search ranks
its lexical side with BM25 (`kb.lexical`), and computing `to_tsvector` for every inserted chunk was most of
PostgreSQL's work per insert. Dropping a column rewrites nothing (PostgreSQL marks it dropped).

Revision ID: 0013_no_fulltext_column
Revises: 0012_file_blobs
"""

from alembic import op
from sqlalchemy import text

revision = "0013_no_fulltext_column"
down_revision = "0012_file_blobs"
branch_labels = None
depends_on = None


def _chunk_tables() -> list[str]:
    rows = op.get_bind().execute(text("SELECT storage_table FROM knowledge_bases")).all()
    return [table for (table,) in rows]


def upgrade() -> None:
    for table in _chunk_tables():
        op.execute(f"ALTER TABLE IF EXISTS {table} DROP COLUMN IF EXISTS tsv")


def downgrade() -> None:
    for table in _chunk_tables():
        op.execute(
            f"ALTER TABLE IF EXISTS {table} ADD COLUMN IF NOT EXISTS tsv tsvector "
            "GENERATED ALWAYS AS (to_tsvector('english', content)) STORED"
        )
        op.execute(f"CREATE INDEX IF NOT EXISTS {table}_tsv ON {table} USING gin (tsv)")
