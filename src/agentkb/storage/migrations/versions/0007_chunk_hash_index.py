"""Index each chunk table's content hash (vector reuse looks chunks up by it on every insert).

Revision ID: 0007
Revises: 0006
"""

from alembic import op
from sqlalchemy import text

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    for (table,) in conn.execute(text("SELECT storage_table FROM knowledge_bases")):
        op.execute(f"CREATE INDEX IF NOT EXISTS {table}_hash ON {table} (content_hash)")
