"""Login throttling: failed logins and invalid credentials counted per subject (`user:<keyed hash of the
user name>` or `client:<address>`), shared by every process on the database. No password and no raw user
name is stored; a row is deleted on a successful login, or once its window has passed.

Revision ID: 0017_login_failures
Revises: 0016_no_metadata_index
"""

import sqlalchemy as sa
from alembic import op

revision = "0017_login_failures"
down_revision = "0016_no_metadata_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "login_failures",
        sa.Column("subject", sa.Text, primary_key=True),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("last_failure", sa.DateTime(timezone=True), nullable=False),
        sa.Column("blocked_until", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("login_failures_last_failure", "login_failures", ["last_failure"])


def downgrade() -> None:
    op.drop_table("login_failures")
