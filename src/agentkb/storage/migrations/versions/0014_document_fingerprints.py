"""Chunk tables gain `doc_fingerprint`: the fingerprint of the document a chunk was made from (what it was
chunked from and how, `kb.chunking.source_fingerprint`, and its chunk count). An insert of an unchanged
document then finds it unchanged without chunking it again. Chunks stored before have none (NULL): their
documents are compared chunk by chunk, as before. Adding a nullable column rewrites nothing.

Revision ID: 0014_document_fingerprints
Revises: 0013_no_fulltext_column
"""

from alembic import op
from sqlalchemy import text

revision = "0014_document_fingerprints"
down_revision = "0013_no_fulltext_column"
branch_labels = None
depends_on = None


def _chunk_tables() -> list[str]:
    rows = op.get_bind().execute(text("SELECT storage_table FROM knowledge_bases")).all()
    return [table for (table,) in rows]


def upgrade() -> None:
    for table in _chunk_tables():
        op.execute(f"ALTER TABLE IF EXISTS {table} ADD COLUMN IF NOT EXISTS doc_fingerprint text")


def downgrade() -> None:
    for table in _chunk_tables():
        op.execute(f"ALTER TABLE IF EXISTS {table} DROP COLUMN IF EXISTS doc_fingerprint")
