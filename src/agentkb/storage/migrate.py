"""Bring the schema to the newest migration. Safe to run from several processes at once.

A database already at the head revisions is recognised with one query (its `alembic_version` against the
heads read from the migration scripts' `revision` / `down_revision` lines), and Alembic (a large import,
which also loads every script) runs only when there is something to apply."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from agentkb.storage.db import to_async_url

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.ext.asyncio import AsyncConnection

MIGRATIONS = Path(__file__).parent / "migrations"
_LOCK_KEY = 0x61676B62  # "agkb": serialises concurrent start-ups on one database
# a script's identifiers, as Alembic's template writes them: `revision = "0021_..."`, `down_revision = ...`
_IDENTIFIER = re.compile(r"^(revision|down_revision)\s*(?::[^=]*)?=\s*(.+)$", re.MULTILINE)


def _config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revisions() -> frozenset[str]:
    """The revisions this code's schema is at once every migration is applied: the scripts' revisions no
    other script revises (what Alembic's `ScriptDirectory.get_heads` answers, without importing it)."""
    revisions: set[str] = set()
    revised: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        fields = {name: ast.literal_eval(value) for name, value in _IDENTIFIER.findall(path.read_text())}
        if "revision" not in fields:  # the package's __init__.py
            continue
        revisions.add(str(fields["revision"]))
        down = fields.get("down_revision")
        revised.update([down] if isinstance(down, str) else down or ())
    return frozenset(revisions - revised)


async def applied_revisions(conn: AsyncConnection) -> frozenset[str]:
    """The revisions the database is at (empty before the first migration)."""
    exists = (await conn.execute(text("SELECT to_regclass('alembic_version') IS NOT NULL"))).scalar_one()
    if not exists:
        return frozenset()
    rows = await conn.execute(text("SELECT version_num FROM alembic_version"))
    return frozenset(str(r[0]) for r in rows)


def _current(url: str) -> bool:
    """Whether the database is at the head revisions: one connection of psycopg's own and one query (none
    yet, no `alembic_version`: False). Not through an engine: SQLAlchemy's first connection asks the server
    several things before the query (about 10 ms of every start)."""
    conninfo = make_url(to_async_url(url)).set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        with psycopg.connect(conninfo) as conn:
            rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    except psycopg.Error:  # no `alembic_version` yet; or the engine below meets (and reports) the failure
        return False
    return frozenset(str(r[0]) for r in rows) == head_revisions()


def upgrade(url: str) -> None:
    if _current(url):
        return
    engine = create_engine(to_async_url(url))
    try:
        from alembic import command

        with engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
            config = _config()
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
    finally:
        engine.dispose()
