"""Chunk tables lose the GIN index on `metadata` (`<table>_meta`, jsonb_path_ops): metadata filters compare
`metadata ->> key`, which that index cannot serve (it answers `@>` only, which no query asks), while every
insert paid for it (see `storage.chunks.create_chunk_table`). Dropping it rewrites nothing.

Revision ID: 0016_no_metadata_index
Revises: 0015_chunk_rows_whole
"""

from alembic import op
from sqlalchemy import text

revision = "0016_no_metadata_index"
down_revision = "0015_chunk_rows_whole"
branch_labels = None
depends_on = None


def _chunk_tables() -> list[str]:
    rows = op.get_bind().execute(text("SELECT storage_table FROM knowledge_bases")).all()
    return [table for (table,) in rows]


def upgrade() -> None:
    for table in _chunk_tables():
        op.execute(f"DROP INDEX IF EXISTS {table}_meta")


def downgrade() -> None:
    for table in _chunk_tables():
        if op.get_bind().execute(text("SELECT to_regclass(:t) IS NOT NULL"), {"t": table}).scalar_one():
            op.execute(
                f"CREATE INDEX IF NOT EXISTS {table}_meta ON {table} USING gin (metadata jsonb_path_ops)"
            )
