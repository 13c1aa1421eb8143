"""Ingestion jobs: every knowledge-base insert, queued or running, with progress and errors.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ingest_jobs",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("project_id", sa.BigInteger, sa.ForeignKey("projects.id"), nullable=False),
        sa.Column(
            "kb_id", sa.BigInteger, sa.ForeignKey("knowledge_bases.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("mode", sa.Text, nullable=False),  # sync: the request waits; async: a worker runs it
        sa.Column("state", sa.Text, nullable=False),  # queued, running, succeeded, failed, cancelled
        sa.Column("request", JSONB, nullable=False),
        sa.Column("counts", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("errors", JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("worker", sa.Text, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_index("ingest_jobs_kb", "ingest_jobs", ["kb_id", "created_at"])
    op.create_index(
        "ingest_jobs_claimable",
        "ingest_jobs",
        ["created_at"],
        postgresql_where=sa.text("state IN ('queued', 'running')"),
    )
