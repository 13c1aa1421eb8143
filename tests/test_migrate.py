"""Migrations at start-up: the heads read from the scripts are Alembic's, a database at them is recognised
without Alembic, and one behind them is still brought up to date."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine

from agentkb.storage import migrate
from tests.secret_helpers import fresh_database, libpq


@pytest.fixture()
def empty_url(pg_url: str) -> Iterator[str]:
    with fresh_database(pg_url, f"migrate_{uuid.uuid4().hex[:8]}") as url:
        yield url


def test_heads_from_the_scripts_are_alembics() -> None:
    assert migrate.head_revisions() == frozenset(ScriptDirectory.from_config(migrate._config()).get_heads())


def _upgrade_in_a_new_process(url: str) -> str:
    """Run `migrate.upgrade(url)` in a fresh interpreter; say whether it imported Alembic."""
    code = (
        "import sys; from agentkb.storage import migrate; "
        f"migrate.upgrade({url!r}); print('alembic' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout.strip()


def test_a_current_database_is_left_alone_and_one_behind_is_upgraded(empty_url: str) -> None:
    assert _upgrade_in_a_new_process(empty_url) == "True"  # a new database: every migration runs
    with psycopg.connect(libpq(empty_url), autocommit=True) as conn:
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    assert frozenset(r[0] for r in rows) == migrate.head_revisions()
    assert _upgrade_in_a_new_process(empty_url) == "False"  # at the heads: one query, no Alembic

    # one revision behind (the newest migration undone by its own downgrade): Alembic applies it again
    last = sorted(migrate.head_revisions())[0]
    script = ScriptDirectory.from_config(migrate._config()).get_revision(last)
    assert script is not None and isinstance(script.down_revision, str)
    engine = create_engine(empty_url)
    try:
        with engine.begin() as conn:
            config = migrate._config()
            config.attributes["connection"] = conn
            command.downgrade(config, "-1")
    finally:
        engine.dispose()
    with psycopg.connect(libpq(empty_url), autocommit=True) as conn:
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    assert [r[0] for r in rows] == [script.down_revision]
    assert _upgrade_in_a_new_process(empty_url) == "True"
    with psycopg.connect(libpq(empty_url), autocommit=True) as conn:
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    assert frozenset(r[0] for r in rows) == migrate.head_revisions()
