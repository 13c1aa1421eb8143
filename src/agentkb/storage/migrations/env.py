"""Alembic environment: runs migrations on the connection `storage.migrate` hands in."""

from __future__ import annotations

from alembic import context

from agentkb.storage.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
