"""Uploaded files' bytes in PostgreSQL (`file_blobs`, `file_blob_parts`), so every process on every host
reads them. A blob is keyed by its SHA-256 and cut in parts of 1 MiB (no row holds a whole large file).
Bytes a server kept on disk before are imported by the server that holds them, at its start.

Revision ID: 0012_file_blobs
Revises: 0011_vector_delta
"""

import sqlalchemy as sa
from alembic import op

revision = "0012_file_blobs"
down_revision = "0011_vector_delta"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "file_blobs",
        sa.Column("sha256", sa.Text, primary_key=True),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("parts", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_table(
        "file_blob_parts",
        sa.Column(
            "sha256", sa.Text, sa.ForeignKey("file_blobs.sha256", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("part", sa.Integer, primary_key=True),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )
    # uploads are mostly compressed formats already (PDF, DOCX, XLSX): store the parts out of line as they are
    op.execute("ALTER TABLE file_blob_parts ALTER COLUMN data SET STORAGE EXTERNAL")


def downgrade() -> None:
    op.drop_table("file_blob_parts")
    op.drop_table("file_blobs")
