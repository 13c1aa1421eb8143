"""The embedded PostgreSQL's own settings (`storage.embedded`): `shared_buffers` from the machine's memory,
written to a file its `postgresql.conf` includes once, and in effect in the server that starts."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import psutil
import psycopg

from agentkb.storage.embedded import SETTINGS_FILE, EmbeddedPostgres, settings

GB = 2**30


def test_shared_buffers_is_a_quarter_of_memory_within_bounds() -> None:
    assert settings(2 * GB) == {"shared_buffers": "512MB"}
    assert settings(GB // 4) == {"shared_buffers": "128MB"}  # never below PostgreSQL's default
    assert settings(16 * GB) == {"shared_buffers": "4096MB"}
    assert settings(64 * GB) == {"shared_buffers": "8192MB"}


def shared_buffers_bytes(url: str) -> int:
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        row = conn.execute(
            "SELECT setting::bigint * pg_size_bytes(unit) FROM pg_settings WHERE name = 'shared_buffers'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_the_embedded_server_starts_with_them_and_includes_them_once() -> None:
    work = Path(tempfile.mkdtemp(prefix="agentkb-test-embedded-"))
    work.chmod(0o755)
    pg_dir = work / "pg"
    want = int(settings(psutil.virtual_memory().total)["shared_buffers"].removesuffix("MB")) * 2**20
    try:
        for _ in range(2):  # a new data directory, then the same one started again
            server = EmbeddedPostgres(pg_dir)
            url = server.start()
            try:
                assert shared_buffers_bytes(url) == want
            finally:
                server.stop()
        conf = (pg_dir / "postgresql.conf").read_text().splitlines()
        assert conf.count(f"include_if_exists = '{SETTINGS_FILE}'") == 1
        assert f"shared_buffers = '{want // 2**20}MB'" in (pg_dir / SETTINGS_FILE).read_text()

        # an operator's ALTER SYSTEM wins (postgresql.auto.conf is read last)
        server = EmbeddedPostgres(pg_dir)
        url = server.start()
        try:
            with psycopg.connect(
                url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True
            ) as conn:
                conn.execute("ALTER SYSTEM SET shared_buffers = '144MB'")
        finally:
            server.stop()
        server = EmbeddedPostgres(pg_dir)
        url = server.start()
        try:
            assert shared_buffers_bytes(url) == 144 * 2**20
        finally:
            server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
