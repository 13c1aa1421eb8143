"""Chunk tables keep their rows whole up to a page (`toast_tuple_target`, `storage.chunks.ROW_TOAST_TARGET`):
a chunk's content is no longer compressed in vain and moved to the TOAST table at each write. Only the table's
storage option changes: rows stored before stay as they are, rows written from now on are kept whole.

Revision ID: 0015_chunk_rows_whole
Revises: 0014_document_fingerprints
"""

from alembic import op
from sqlalchemy import text

revision = "0015_chunk_rows_whole"
down_revision = "0014_document_fingerprints"
branch_labels = None
depends_on = None

ROW_TOAST_TARGET = 8160  # storage.chunks.ROW_TOAST_TARGET when this revision was written


def _chunk_tables() -> list[str]:
    rows = op.get_bind().execute(text("SELECT storage_table FROM knowledge_bases")).all()
    return [table for (table,) in rows]


def upgrade() -> None:
    for table in _chunk_tables():
        op.execute(f"ALTER TABLE IF EXISTS {table} SET (toast_tuple_target = {ROW_TOAST_TARGET})")


def downgrade() -> None:
    for table in _chunk_tables():
        op.execute(f"ALTER TABLE IF EXISTS {table} RESET (toast_tuple_target)")
