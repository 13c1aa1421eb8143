"""Data sources (`/api/databases`) against a real MariaDB and PostgreSQL, and read-only SELECT pushdown."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkb.destinations import DataSourcePolicy
from agentkb.errors import BadRequest, NotFound
from agentkb.service.catalog.data_sources import DataSourceService
from agentkb.sql import datasources
from agentkb.sql.pushdown import parse_select, stream_rows
from agentkb.storage.db import Database
from tests import externals
from tests.externals import MARIADB

# the operator's allowances: the suite's own PostgreSQL over its socket, files anywhere
ALLOW_ALL = DataSourcePolicy(file_dir=Path("/"), allow_local=True)

ROWS = 2500
COLUMNS = "id INT PRIMARY KEY, name VARCHAR(64), note TEXT"


def _seed_rows() -> list[tuple[int, str, str | None]]:
    return [(i, f"row {i}", "50% off" if i % 2 else None) for i in range(1, ROWS + 1)]


@pytest.fixture(scope="module")
def maria_table(mariadb: dict[str, Any]) -> Iterator[str]:
    name = f"agentkb_src_{uuid.uuid4().hex[:8]}"
    with externals.table("mariadb", mariadb, name, COLUMNS, _seed_rows()):
        yield name


@pytest.fixture(scope="module")
def pg_schema(pg_source: dict[str, Any]) -> Iterator[str]:
    name = f"agentkb_src_{uuid.uuid4().hex[:8]}"
    externals.execute("postgres", pg_source, f"CREATE SCHEMA {name}", f"CREATE SEQUENCE {name}.seq")
    with externals.table("postgres", pg_source, f"{name}.items", COLUMNS, _seed_rows()):
        yield name  # the schema; the table is <schema>.items, the sequence <schema>.seq
    externals.execute("postgres", pg_source, f"DROP SCHEMA {name} CASCADE")


@pytest.fixture(params=[pytest.param("mariadb", marks=pytest.mark.mariadb), "postgres"])
def seeded(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any], str, str]:
    """One engine's seeded table: (engine, parameters, the table's name there, a statement that writes)."""
    if request.param == "mariadb":
        name = request.getfixturevalue("maria_table")
        return "mariadb", MARIADB, name, f"DELETE FROM {name} WHERE id = 1"
    schema = request.getfixturevalue("pg_schema")
    params = {**request.getfixturevalue("pg_source"), "schema": schema}
    return "postgres", params, "items", f"SELECT nextval('{schema}.seq')"


def _create(
    client: httpx.Client, name: str, engine: str, parameters: dict[str, Any], *, check: bool = True
) -> httpx.Response:
    """POST /api/databases; `check`: with `check_connection` (connect before storing)."""
    database = {"name": name, "engine": engine, "parameters": parameters}
    return client.post("/api/databases", json={"database": database, "check_connection": check})


# --- HTTP resource ------------------------------------------------------------------------------------


def test_mariadb_source_lifecycle(client: httpx.Client, unique: str, maria_table: str) -> None:
    name = f"maria_{unique}"
    created = _create(client, name, "mariadb", MARIADB)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body == {"name": name, "type": "data", "engine": "mariadb", "id": body["id"]}  # MindsDB's four
    assert isinstance(body["id"], int)

    listed = client.get("/api/databases").json()
    system = {"type": "system", "id": None, "engine": None, "visible": True, "deletable": False}
    assert listed[:2] == [{"name": "information_schema", **system}, {"name": "log", **system}]
    assert {"name": "mindsdb", "type": "project", "deletable": False}.items() <= next(
        d for d in listed if d["name"] == "mindsdb"
    ).items()
    entry = next(d for d in listed if d["name"] == name)
    assert entry == {
        **body,
        "class_type": "sql",
        "connection_data": entry["connection_data"],
        "visible": True,
        "deletable": True,
    }
    assert (
        entry["connection_data"]["password"] == "******" and entry["connection_data"]["host"] == "127.0.0.1"
    )
    assert client.get("/api/databases/").json() == listed  # MindsDB clients' trailing-slash form

    record = client.get(f"/api/databases/{name}").json()
    assert record == {
        **body,
        "connection_data": entry["connection_data"],
        "class_type": "sql",
        "permanent": False,
        "date_last_update": record["date_last_update"],
    }
    assert client.get(f"/api/databases/{name.upper()}").json() == record  # case-insensitive, as MindsDB

    duplicate = _create(client, name, "mysql", MARIADB)
    assert duplicate.status_code == 409 and duplicate.json()["title"] == "Name conflict"

    assert client.delete(f"/api/databases/{name}").status_code == 204
    missing = client.get(f"/api/databases/{name}")
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("application/problem+json")
    assert missing.json()["title"] == "Database not found"
    assert client.delete(f"/api/databases/{name}/").status_code == 404


def test_postgres_source_masks_every_secret(
    client: httpx.Client, unique: str, pg_source: dict[str, Any], pg_schema: str
) -> None:
    name = f"pg_{unique}"
    params = {**pg_source, "password": "s3cret-pw", "schema": pg_schema, "extra": {"api_token": "t0k"}}
    created = client.post(
        "/api/databases/", json={"database": {"name": name, "engine": "postgres", "parameters": params}}
    )
    assert created.status_code == 201, created.text
    assert "s3cret-pw" not in created.text and "t0k" not in created.text
    fetched = client.get(f"/api/databases/{name}/")
    assert "s3cret-pw" not in fetched.text and "t0k" not in fetched.text
    expected = {**params, "password": "******", "extra": {"api_token": "******"}}
    assert fetched.json()["connection_data"] == expected
    assert "s3cret-pw" not in client.get("/api/databases").text
    assert client.delete(f"/api/databases/{name}").status_code == 204


def test_refusals(client: httpx.Client, unique: str, maria_table: str, pg_source: dict[str, Any]) -> None:
    bad_engine = _create(client, f"x_{unique}", "informix", MARIADB)
    assert bad_engine.status_code == 400
    assert all(e in bad_engine.json()["detail"] for e in ("postgres", "mysql", "mariadb", "sqlite", "duckdb"))

    wrong = _create(client, f"x_{unique}", "mysql", {**MARIADB, "password": "Wr0ng-pa55"})
    assert wrong.status_code == 400 and wrong.json()["title"] == "Connection error"
    assert "Access denied" in wrong.json()["detail"] and "Wr0ng-pa55" not in wrong.text

    no_db = _create(client, f"x_{unique}", "postgresql", {**pg_source, "database": f"nope_{unique}"})
    assert no_db.status_code == 400 and no_db.json()["title"] == "Connection error"
    assert client.get(f"/api/databases/x_{unique}").status_code == 404  # nothing was stored

    assert _create(client, f"x_{unique}", "mysql", {"user": "root"}).status_code == 400  # no host
    assert client.get(f"/api/databases/x_{unique}").status_code == 404
    assert _create(client, "not a name", "mysql", MARIADB).status_code == 400
    assert client.post("/api/databases", json={"name": "x"}).status_code == 400

    for taken in ("mindsdb", "MindsDB", "information_schema"):  # one namespace with projects and system dbs
        conflict = _create(client, taken, "mariadb", MARIADB)
        assert conflict.status_code == 409 and conflict.json()["title"] == "Name conflict"

    assert client.delete("/api/databases/mindsdb").status_code == 400
    assert client.delete("/api/databases/information_schema").status_code == 400
    assert client.get("/api/databases/mindsdb").json()["type"] == "project"
    assert client.get(f"/api/databases/unknown_{unique}").status_code == 404
    assert client.delete(f"/api/databases/unknown_{unique}").status_code == 404


def test_parameters_are_checked_on_request_or_first_use(
    client: httpx.Client, unique: str, tmp_path: Path
) -> None:
    """As MindsDB: without `check_connection` any parameters are stored ({} too) and a broken source fails
    when it is used; with it, nothing is stored unless the connection works."""
    name = f"lazy_{unique}"
    created = _create(client, name, "sqlite", {}, check=False)
    assert created.status_code == 201, created.text
    used = client.post("/api/sql/query", json={"query": f"SELECT * FROM {name}.t"}).json()
    assert used["type"] == "error" and "parameter 'database' is required" in used["error_message"]

    db_file = tmp_path / "lazy.db"
    with sqlite3.connect(db_file) as conn:
        conn.execute("CREATE TABLE t (a INTEGER)")
        conn.execute("INSERT INTO t VALUES (7)")
    missing = {"database": {"parameters": {"db_file": str(tmp_path / "absent.db")}}, "check_connection": True}
    refused = client.put(f"/api/databases/{name}", json=missing)
    assert refused.status_code == 400 and refused.json()["title"] == "Connection error"
    assert client.get(f"/api/databases/{name}").json()["connection_data"] == {}  # unchanged
    fixed = client.put(f"/api/databases/{name}", json={"database": {"parameters": {"db_file": str(db_file)}}})
    assert fixed.status_code == 200 and fixed.json()["connection_data"] == {"db_file": str(db_file)}
    rows = client.post("/api/sql/query", json={"query": f"SELECT a FROM {name}.t"}).json()
    assert rows["data"] == [[7]], rows

    assert client.get("/api/databases/log").json() == {
        "name": "log",
        "type": "system",
        "id": None,
        "engine": None,
    }
    assert client.delete("/api/databases/log").status_code == 400
    assert client.delete(f"/api/databases/{name}").status_code == 204


# --- pushdown: parsing --------------------------------------------------------------------------------

HOSTILE = [
    "DROP TABLE ds.t",
    "UPDATE ds.t SET a = 1",
    "DELETE FROM ds.t",
    "INSERT INTO ds.t VALUES (1)",
    "select 1 from ds.t; delete from x",
    "select 1; delete from x",
    "select pg_sleep(5) from ds.t",
    "select pg_catalog.pg_sleep(5), id from ds.t",
    "COPY ds.t TO STDOUT",
    "select * into t2 from ds.t",
    "select id into @v from ds.t",
    "select * from t",
    "select * from ds.t join other.u on true",
    "select * from ds.t union select * from other.t",
    "select * from ds.t for update",
    "select * from ds.t lock in share mode",
    "select * from information_schema.tables",
    "with d as (delete from ds.t returning *) select * from d",
    "select * from ds.t where id in (select id from t2)",
    "SET search_path = evil",
    "CALL ds.proc()",
    "explain analyze select * from ds.t",
    "select sleep(10) from ds.t",
    "select benchmark(100000000, md5('a')) from ds.t",
    "select load_file('/etc/passwd') from ds.t",
    "select lo_import('/etc/passwd') from ds.t",
    "select * from dblink('host=x', 'select 1') as r(a int)",
    "select query_to_xml('select pg_sleep(9)', true, true, '') from ds.t",
    "select 1",
    "select * from a.b.c.d",
    "TRUNCATE ds.t",
    "CREATE TABLE ds.x AS SELECT 1",
    "select @v from ds.t",
    "select * from ds.t where id = ?",
    "select @$q$ from ds.t where a = ' $q$, pg_sleep(9) --'",
    "select $q$(1) from ds.t",
    "",
]


@pytest.mark.parametrize("sql", HOSTILE)
def test_hostile_queries_are_refused(sql: str) -> None:
    with pytest.raises(BadRequest):
        parse_select(sql)


@pytest.mark.parametrize(
    ("sql", "postgres", "mysql"),
    [
        ("select id, name from ds.t where name like 'a%' limit 5",
         "SELECT id, name FROM t WHERE name LIKE 'a%' LIMIT 5", "SELECT id, name FROM t WHERE name LIKE 'a%' LIMIT 5"),
        ("SELECT ds.s.t.id, `ds`.`s`.`t`.* FROM ds.s.t", "SELECT s.t.id, \"s\".\"t\".* FROM s.t",
         "SELECT s.t.id, `s`.`t`.* FROM s.t"),
        ("with x as (select * from ds.t) select a from x union all select a from ds.u",
         "WITH x AS (SELECT * FROM t) SELECT a FROM x UNION ALL SELECT a FROM u",
         "WITH x AS (SELECT * FROM t) SELECT a FROM x UNION ALL SELECT a FROM u"),
        ("select x::int from ds.t where y = 'it''s'", "SELECT CAST(x AS INT) FROM t WHERE y = 'it''s'",
         "SELECT CAST(x AS SIGNED) FROM t WHERE y = 'it''s'"),
        ("select /*! 1; drop table t */ id from ds.t", "SELECT id FROM t", "SELECT id FROM t"),
    ],
)  # fmt: skip
def test_valid_queries_render_per_dialect(sql: str, postgres: str, mysql: str) -> None:
    query = parse_select(sql)
    assert query.datasource == "ds"
    assert query.render("postgres") == postgres
    assert query.render("mysql") == mysql


def test_rendering_is_lexically_safe() -> None:
    # MySQL reads `$q$` as an identifier; PostgreSQL would read it as a dollar quote, hiding `pg_sleep` inside
    # a "string" from the checks. Odd identifiers are therefore always quoted.
    query = parse_select("select $q$ from ds.t where a = ' $q$, pg_sleep(9) --'")
    assert query.render("postgres") == """SELECT "$q$" FROM t WHERE a = ' $q$, pg_sleep(9) --'"""
    # A clause the target cannot express is an error, never silently dropped.
    with pytest.raises(BadRequest):
        parse_select("select now() at time zone 'utc' from ds.t").render("mysql")


# --- pushdown: streaming ------------------------------------------------------------------------------


def test_stream_rows_in_batches(seeded: tuple[str, dict[str, Any], str, str]) -> None:
    engine_name, params, name, _ = seeded
    table = f"ds.{name}"
    engine = datasources.create(engine_name, params, ALLOW_ALL)
    try:
        query = parse_select(f"SELECT id, name, note FROM {table} ORDER BY id")
        batches = list(stream_rows(engine, query.render(datasources.dialect_of(engine_name)), 1000))
        assert [len(rows) for _, rows in batches] == [1000, 1000, 500], engine_name
        assert batches[0][0] == ["id", "name", "note"]
        assert [r["id"] for _, rows in batches for r in rows] == list(range(1, ROWS + 1))
        assert batches[2][1][-1] == {"id": ROWS, "name": f"row {ROWS}", "note": None}

        like = parse_select(f"SELECT count(*) AS n FROM {table} WHERE note LIKE '50%'")  # '%' is literal
        assert list(stream_rows(engine, like.render(datasources.dialect_of(engine_name)))) == [
            (["n"], [{"n": ROWS // 2}])
        ]
        tricky = parse_select(f"SELECT 'x\\\\y''z' AS s FROM {table} WHERE id = 1")  # MySQL text: x\\y''z
        rendered = tricky.render(datasources.dialect_of(engine_name))
        assert list(stream_rows(engine, rendered)) == [(["s"], [{"s": "x\\y'z"}])], rendered
        empty = list(stream_rows(engine, f"SELECT id FROM {name} WHERE id < 0"))
        assert empty == [(["id"], [])]
        abandoned = stream_rows(engine, f"SELECT id FROM {name}", 100)
        assert len(next(abandoned)[1]) == 100
        abandoned.close()  # drops the connection rather than draining the cursor
    finally:
        engine.dispose()


def test_stream_rows_is_read_only_and_timed(seeded: tuple[str, dict[str, Any], str, str]) -> None:
    """Even SQL that bypassed `parse_select` cannot write, and cannot run past the timeout."""
    slow = "SELECT count(*) FROM {t} a, {t} b, {t} c"
    engine_name, params, table, write = seeded
    engine = datasources.create(engine_name, params, ALLOW_ALL)
    try:
        with pytest.raises(BadRequest) as refused:
            list(stream_rows(engine, write))
        assert "read only" in refused.value.detail.lower().replace("-", " "), refused.value.detail
        assert refused.value.title == "Query error"
        with pytest.raises(BadRequest):
            list(stream_rows(engine, slow.format(t=table), timeout_s=0.5))
        assert list(stream_rows(engine, f"SELECT count(*) AS n FROM {table}")) == [(["n"], [{"n": ROWS}])]
    finally:
        engine.dispose()


async def test_service_stream_query(
    served: Any, pg_url: str, unique: str, pg_source: dict[str, Any], pg_schema: str, tmp_path: Path
) -> None:
    lite = tmp_path / "lite.db"
    with sqlite3.connect(lite) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.executemany("INSERT INTO notes VALUES (?, ?)", [(i, f"note {i}") for i in range(1, 6)])
    db = Database(pg_url, pool_size=2)
    service = DataSourceService(db, policy=ALLOW_ALL)
    try:
        await service.create(f"pgs_{unique}", "postgresql", {**pg_source, "schema": pg_schema})
        await service.create(f"lite_{unique}", "sqlite", {"db_file": str(lite)})

        batches = [
            b async for b in service.stream_query(f"SELECT id FROM pgs_{unique}.items ORDER BY id", 1000)
        ]
        assert [len(rows) for _, rows in batches] == [1000, 1000, 500]

        async for columns, rows in service.stream_query(f"SELECT * FROM pgs_{unique}.items", 100):
            assert columns == ["id", "name", "note"] and len(rows) == 100
            break  # the worker notices and stops; nothing hangs

        lite_rows = [
            r async for _, rows in service.stream_query(f"select body from lite_{unique}.notes") for r in rows
        ]
        assert lite_rows == [{"body": f"note {i}"} for i in range(1, 6)]
        with pytest.raises(BadRequest):  # sqlite sources are opened read-only
            [b async for b in service.stream_query(f"select * from lite_{unique}.notes for update")]

        with pytest.raises(NotFound):
            [b async for b in service.stream_query(f"SELECT * FROM missing_{unique}.items")]
        with pytest.raises(BadRequest):
            [b async for b in service.stream_query(f"DELETE FROM pgs_{unique}.items")]
        with pytest.raises(BadRequest) as missing_table:
            [b async for b in service.stream_query(f"SELECT * FROM pgs_{unique}.no_such_table")]
        assert missing_table.value.title == "Query error"
    finally:
        for name in (f"pgs_{unique}", f"lite_{unique}"):
            await service.delete(name)
        service.close()
        await db.close()
