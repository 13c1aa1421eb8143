"""Bring the schema to the newest migration. Safe to run from several processes at once."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.storage.db import to_async_url

MIGRATIONS = Path(__file__).parent / "migrations"
_LOCK_KEY = 0x61676B62  # "agkb": serialises concurrent start-ups on one database


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revisions() -> frozenset[str]:
    """The revisions this code's schema is at once every migration is applied."""
    return frozenset(ScriptDirectory.from_config(_config()).get_heads())


async def applied_revisions(conn: AsyncConnection) -> frozenset[str]:
    """The revisions the database is at (empty before the first migration)."""
    exists = (await conn.execute(text("SELECT to_regclass('alembic_version') IS NOT NULL"))).scalar_one()
    if not exists:
        return frozenset()
    rows = await conn.execute(text("SELECT version_num FROM alembic_version"))
    return frozenset(str(r[0]) for r in rows)


def upgrade(url: str) -> None:
    engine = create_engine(to_async_url(url))
    try:
        with engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
            config = _config()
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
    finally:
        engine.dispose()
