"""API keys get a scope: `read_only` (no writes) and `projects` (the projects the key may use; NULL: every
project and the global objects). Existing keys keep full access: not read-only, no project list.

Revision ID: 0017_api_key_scopes
Revises: 0016_no_metadata_index
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0017_api_key_scopes"
down_revision = "0016_no_metadata_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("read_only", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("api_keys", sa.Column("projects", postgresql.ARRAY(sa.Text()), nullable=True))


def downgrade() -> None:
    op.drop_column("api_keys", "projects")
    op.drop_column("api_keys", "read_only")
