"""SQL inserts as MindsDB's queries (`information_schema.queries`): every job gets an integer query id; a job
started by an `INSERT ... SELECT` statement keeps its SQL and database, a partitioned one its progress
(`context`: the last track value), and `query_cancel` takes it off the list (`query_removed`).

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("ingest_jobs", sa.Column("query_id", sa.BigInteger, sa.Identity(), nullable=False))
    op.add_column("ingest_jobs", sa.Column("sql", sa.Text, nullable=True))
    op.add_column("ingest_jobs", sa.Column("sql_database", sa.Text, nullable=True))
    op.add_column(
        "ingest_jobs",
        sa.Column("context", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    )
    op.add_column(
        "ingest_jobs",
        sa.Column("query_removed", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_index("ingest_jobs_query_id", "ingest_jobs", ["query_id"], unique=True)
    op.create_index(
        "ingest_jobs_queries",
        "ingest_jobs",
        ["kb_id", "created_at"],
        postgresql_where=sa.text("sql IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ingest_jobs_queries", "ingest_jobs")
    op.drop_index("ingest_jobs_query_id", "ingest_jobs")
    for column in ("query_removed", "context", "sql_database", "sql", "query_id"):
        op.drop_column("ingest_jobs", column)
