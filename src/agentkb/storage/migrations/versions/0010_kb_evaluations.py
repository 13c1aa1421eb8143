"""Knowledge-base evaluation runs (`EVALUATE KNOWLEDGE_BASE`): summary metrics and per-question results.

Revision ID: 0010_kb_evaluations
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0010_kb_evaluations"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kb_evaluations",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column(
            "knowledge_base_id",
            sa.BigInteger,
            sa.ForeignKey("knowledge_bases.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("version", sa.Text, nullable=False),
        sa.Column("test_table", sa.Text, nullable=True),
        sa.Column("params", JSONB, nullable=False),
        sa.Column("metrics", JSONB, nullable=False),
        sa.Column("results", JSONB, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_index("kb_evaluations_kb_created", "kb_evaluations", ["knowledge_base_id", "created_at"])


def downgrade() -> None:
    op.drop_table("kb_evaluations")
