"""API keys get a scope: `read_only` (no writes) and `projects` (the projects the key may use; NULL: every
project and the global objects). Existing keys keep full access: not read-only, no project list. Written to
be run again over a database that has the columns already (`IF NOT EXISTS`).

Revision ID: 0018_api_key_scopes
Revises: 0017_login_failures
"""

from alembic import op

revision = "0018_api_key_scopes"
down_revision = "0017_login_failures"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS read_only boolean NOT NULL DEFAULT false")
    op.execute("ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS projects text[]")


def downgrade() -> None:
    op.execute("ALTER TABLE api_keys DROP COLUMN IF EXISTS projects")
    op.execute("ALTER TABLE api_keys DROP COLUMN IF EXISTS read_only")
