"""Agent run traces: question, tool steps, answer or error, token usage.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_traces",
        sa.Column("trace_id", sa.Text, primary_key=True),
        sa.Column("agent_id", sa.BigInteger, sa.ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
        sa.Column("project_id", sa.BigInteger, nullable=False),
        sa.Column("question", sa.Text, nullable=False),
        sa.Column("answer", sa.Text, nullable=True),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("steps", JSONB, nullable=False),
        sa.Column("usage", JSONB, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("agent_traces_agent_started", "agent_traces", ["agent_id", "started_at"])


def downgrade() -> None:
    op.drop_table("agent_traces")
