"""A chunk's full-text vector (`tsv`) is filled after the insert that wrote the chunk, in the background
(`storage.chunks.fill_text_vectors`), instead of by a generated column during the insert: computing it was
most of PostgreSQL's work per inserted chunk. Rows not yet filled (`tsv IS NULL`, found through the partial
index `<table>_tsv_todo`) are matched on the fly by full-text searches, so results do not change. Existing
tables keep their values (the generated column becomes a plain one: no rewrite).

Revision ID: 0013_deferred_tsv
Revises: 0012_file_blobs
"""

from alembic import op
from sqlalchemy import text

revision = "0013_deferred_tsv"
down_revision = "0012_file_blobs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    for (table,) in conn.execute(text("SELECT storage_table FROM knowledge_bases")).all():
        op.execute(f"ALTER TABLE {table} ALTER COLUMN tsv DROP EXPRESSION IF EXISTS")
        op.execute(f"CREATE INDEX IF NOT EXISTS {table}_tsv_todo ON {table} (seq) WHERE tsv IS NULL")


def downgrade() -> None:
    conn = op.get_bind()
    for (table,) in conn.execute(text("SELECT storage_table FROM knowledge_bases")).all():
        op.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS tsv")  # its indexes go with it
        op.execute(
            f"ALTER TABLE {table} ADD COLUMN tsv tsvector "
            "GENERATED ALWAYS AS (to_tsvector('english', content)) STORED"
        )
        op.execute(f"CREATE INDEX {table}_tsv ON {table} USING gin (tsv)")
