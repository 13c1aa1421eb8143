"""A knowledge base's `content_version`: when its chunks last changed (an insert that wrote or deleted
chunks, a delete of documents, an UPDATE of a chunk). Its `updated_at` moves with every change of the KB,
its settings' too; the caches built from the chunks alone (the BM25 indexes) are keyed by this one, so that
changing a setting (say `ef_search`) does not rebuild a large KB's index. Existing rows start from their
`updated_at`.

Revision ID: 0022_kb_content_version
Revises: 0021_chunk_contexts
"""

from alembic import op

revision = "0022_kb_content_version"
down_revision = "0021_chunk_contexts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE knowledge_bases ADD COLUMN IF NOT EXISTS content_version timestamptz")
    op.execute("UPDATE knowledge_bases SET content_version = updated_at WHERE content_version IS NULL")
    op.execute(
        "ALTER TABLE knowledge_bases ALTER COLUMN content_version SET DEFAULT now(), "
        "ALTER COLUMN content_version SET NOT NULL"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE knowledge_bases DROP COLUMN IF EXISTS content_version")
