"""Bulk vector writes: each chunk row gets `seq`, and `chunk_vector_indexes` keeps the watermark up to which
a chunk table's HNSW index holds its rows (see `storage.vector_index`). Existing rows keep seq 0 (no table
rewrite) and stay in their existing index; new rows count up from 1 and wait in the delta for a merge.

Revision ID: 0011_vector_delta
Revises: 0010_kb_evaluations
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy import text

revision = "0011_vector_delta"
down_revision = "0010_kb_evaluations"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "chunk_vector_indexes",
        sa.Column("storage_table", sa.Text, primary_key=True),
        sa.Column("indexed_seq", sa.BigInteger, nullable=False, server_default="0"),
    )
    conn = op.get_bind()
    for (table,) in conn.execute(text("SELECT storage_table FROM knowledge_bases")).all():
        op.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS seq bigint NOT NULL DEFAULT 0")
        op.execute(f"CREATE SEQUENCE IF NOT EXISTS {table}_seq_seq OWNED BY {table}.seq")
        op.execute(f"ALTER TABLE {table} ALTER COLUMN seq SET DEFAULT nextval('{table}_seq_seq')")
        op.execute(f"CREATE INDEX IF NOT EXISTS {table}_seq ON {table} (seq)")


def downgrade() -> None:
    conn = op.get_bind()
    for (table,) in conn.execute(text("SELECT storage_table FROM knowledge_bases")).all():
        op.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS seq")
    op.drop_table("chunk_vector_indexes")
