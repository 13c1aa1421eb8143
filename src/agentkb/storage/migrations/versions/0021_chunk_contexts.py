"""The contexts an LLM wrote for the chunks of knowledge bases with contextual preprocessing
(`chunk_contexts`), by a key over the model, the prompt's template, the document and the chunk
(`kb.contextual.cache_key`): a re-insert of unchanged text, or an insert retried after a failure, asks the LLM
nothing. No foreign key: the contexts are written beside the insert's transaction (which holds the knowledge
base's row lock), and knowledge-base ids are never reused; dropping a knowledge base deletes its contexts.

Revision ID: 0021_chunk_contexts
Revises: 0020_crawl_sources
"""

from alembic import op

revision = "0021_chunk_contexts"
down_revision = "0020_crawl_sources"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """CREATE TABLE IF NOT EXISTS chunk_contexts (
            kb_id bigint NOT NULL,
            key text NOT NULL,
            context text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (kb_id, key)
        )"""
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS chunk_contexts")
