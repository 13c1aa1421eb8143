"""Bring the schema to the newest migration. Safe to run from several processes at once."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text

from agentkb.storage.db import to_async_url

MIGRATIONS = Path(__file__).parent / "migrations"
_LOCK_KEY = 0x61676B62  # "agkb": serialises concurrent start-ups on one database


def upgrade(url: str) -> None:
    engine = create_engine(to_async_url(url))
    try:
        with engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
            config = Config()
            config.set_main_option("script_location", str(MIGRATIONS))
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
    finally:
        engine.dispose()
