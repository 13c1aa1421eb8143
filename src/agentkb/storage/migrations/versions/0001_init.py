"""Projects, agents and knowledge bases.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _timestamps() -> list[sa.Column]:  # type: ignore[type-arg]
    return [
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    ]


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "projects",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("name", sa.Text, nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_table(
        "agents",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("project_id", sa.BigInteger, sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("model", JSONB, nullable=False),
        sa.Column("data", JSONB, nullable=False),
        sa.Column("prompt_template", sa.Text, nullable=True),
        sa.Column("params", JSONB, nullable=False),
        *_timestamps(),
        sa.UniqueConstraint("project_id", "name", name="agents_project_name_key"),
    )
    op.create_table(
        "knowledge_bases",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("project_id", sa.BigInteger, sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("embedding_model", JSONB, nullable=False),
        sa.Column("reranking_model", JSONB, nullable=True),
        sa.Column("metadata_columns", JSONB, nullable=True),
        sa.Column("content_columns", JSONB, nullable=True),
        sa.Column("id_column", sa.Text, nullable=True),
        sa.Column("params", JSONB, nullable=False),
        sa.Column("storage_table", sa.Text, nullable=False),
        sa.Column("vector_dim", sa.Integer, nullable=False),
        *_timestamps(),
        sa.UniqueConstraint("project_id", "name", name="knowledge_bases_project_name_key"),
    )
