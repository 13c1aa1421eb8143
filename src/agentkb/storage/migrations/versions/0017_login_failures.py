"""Login throttling: failed logins and invalid credentials counted per subject (`user:<keyed hash of the
user name>` or `client:<address>`), shared by every process on the database. No password and no raw user
name is stored; a row is deleted on a successful login, or once its window has passed. Written to be run
again over a database that has the table already (`IF NOT EXISTS`).

Revision ID: 0017_login_failures
Revises: 0016_no_metadata_index
"""

from alembic import op

revision = "0017_login_failures"
down_revision = "0016_no_metadata_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS login_failures (
            subject text PRIMARY KEY,
            failures integer NOT NULL,
            last_failure timestamptz NOT NULL,
            blocked_until timestamptz
        )
        """
    )
    op.execute("CREATE INDEX IF NOT EXISTS login_failures_last_failure ON login_failures (last_failure)")


def downgrade() -> None:
    op.drop_table("login_failures")
