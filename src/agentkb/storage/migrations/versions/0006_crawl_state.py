"""What the last crawl of each URL saw, per knowledge base (ETag, Last-Modified, content hash).

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "crawl_state",
        sa.Column(
            "kb_id", sa.BigInteger, sa.ForeignKey("knowledge_bases.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("url", sa.Text, primary_key=True),
        sa.Column("etag", sa.Text, nullable=True),
        sa.Column("last_modified", sa.Text, nullable=True),
        sa.Column("content_hash", sa.Text, nullable=True),
        sa.Column("fetched_at", sa.Text, nullable=False),
    )
