"""The databases the data-source tests read from, in one place (a pytest plugin: tests/conftest.py loads it).

- `mariadb`: the parameters of the external MariaDB on 127.0.0.1:3306 (user root, no password, database
  `test`). A test that uses it is marked `mariadb` (so `-m "not mariadb"` leaves it out) and is skipped,
  with the reason, when nothing answers there.
- `pg_source`: the parameters of a PostgreSQL data source: the database `sources` in the suite's own
  embedded PostgreSQL (`pg_url`), reached over its Unix socket. Always there; no external PostgreSQL.

`table(...)` creates and fills a table for a block and drops it after; `execute(...)` and `query(...)` run
statements on either engine.
"""

from __future__ import annotations

import functools
import socket
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from typing import Any

import psycopg
import pymysql
import pytest
from psycopg.conninfo import conninfo_to_dict

MARIADB_HOST, MARIADB_PORT = "127.0.0.1", 3306
MARIADB = {"host": MARIADB_HOST, "port": MARIADB_PORT, "user": "root", "password": "", "database": "test"}
MARIADB_MISSING = (
    f"no MariaDB on {MARIADB_HOST}:{MARIADB_PORT}: the MySQL/MariaDB data-source tests need it "
    "(user root, no password, database `test`)"
)


@functools.cache
def reachable(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
        return True
    except OSError:
        return False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "mariadb" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.mariadb)


@pytest.fixture(scope="session")
def mariadb() -> dict[str, Any]:
    if not reachable(MARIADB_HOST, MARIADB_PORT):
        pytest.skip(MARIADB_MISSING)
    return dict(MARIADB)


@pytest.fixture(scope="session")
def pg_source(pg_url: str) -> dict[str, Any]:
    server = conninfo_to_dict(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        port = int(conn.execute("SHOW port").fetchone()[0])  # type: ignore[index]
        conn.execute("CREATE DATABASE sources")
    return {
        "host": server["host"],
        "port": port,
        "user": server.get("user", "postgres"),
        "database": "sources",
    }


def connect(engine: str, params: Mapping[str, Any]) -> Any:
    """An autocommit DB-API connection to a data source of `engine` (`mariadb` or `postgres`)."""
    if engine in ("mariadb", "mysql"):
        return pymysql.connect(**params, autocommit=True)
    return psycopg.connect(
        host=params["host"],
        port=params.get("port", 5432),
        user=params["user"],
        dbname=params["database"],
        autocommit=True,
    )


def execute(engine: str, params: Mapping[str, Any], *statements: str) -> None:
    with closing(connect(engine, params)) as conn, closing(conn.cursor()) as cur:
        for statement in statements:
            cur.execute(statement)


def query(engine: str, params: Mapping[str, Any], sql: str) -> list[tuple[Any, ...]]:
    with closing(connect(engine, params)) as conn, closing(conn.cursor()) as cur:
        cur.execute(sql)
        return [tuple(row) for row in cur.fetchall()]


@contextmanager
def table(
    engine: str, params: Mapping[str, Any], name: str, columns: str, rows: Sequence[Sequence[Any]] = ()
) -> Iterator[str]:
    """The table `name` (`columns` is its SQL column list) holding `rows` for the block; dropped after."""
    with closing(connect(engine, params)) as conn, closing(conn.cursor()) as cur:
        cur.execute(f"CREATE TABLE {name} ({columns})")
        if rows:
            cur.executemany(f"INSERT INTO {name} VALUES ({', '.join(['%s'] * len(rows[0]))})", rows)
    try:
        yield name
    finally:
        execute(engine, params, f"DROP TABLE IF EXISTS {name}")
