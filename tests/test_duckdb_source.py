"""DuckDB files as data sources (MindsDB's `duckdb` engine), over real HTTP: an agent's `tables` and SQL tools,
`INSERT INTO <kb> SELECT ... FROM <duckdb>.<table>`, planned joins with a KB and another source — and the
sandbox: no file or network function through the source (pushed down, native, or stored in the file as a
view), no file outside the data-source directory, no ATTACH / INSTALL / LOAD / SET on its connections."""

from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import httpx
import pytest

from agentkb.destinations import DataSourcePolicy
from agentkb.errors import BadRequest
from agentkb.sql import datasources, pushdown
from tests.helpers import assert_problem, stub_kb
from tests.helpers import sql_error as error
from tests.helpers import sql_ok as ok
from tests.helpers import sql_rows as rows
from tests.openai_stub import OpenAIStub, text, tool_call

P = "/api/projects/mindsdb"


@dataclass(frozen=True)
class World:
    folder: Path
    ddb: str  # the DuckDB data source
    lite: str  # a SQLite data source beside it
    kb: str


def write_duckdb(path: Path) -> None:
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE items (id INTEGER, name VARCHAR, ok BOOLEAN, price DECIMAL(6,2))")
        conn.execute(
            "INSERT INTO items VALUES (1, 'apple', true, 1.50), (2, 'banana', false, 0.25), "
            "(3, 'cherry', true, 4.00)"
        )
        conn.execute("CREATE TABLE docs (id INTEGER, body VARCHAR)")
        conn.execute(
            "INSERT INTO docs VALUES (1, 'Apples grow on trees'), (2, 'Bananas are yellow'), "
            "(3, 'Cherries are small and red')"
        )
        # a view stored in the file that reads a server file: DuckDB itself must refuse it when it runs
        conn.execute("CREATE VIEW leak AS SELECT * FROM read_text('/etc/passwd')")


@pytest.fixture(scope="module")
def world(base_url: str, stub: OpenAIStub) -> Iterator[World]:
    # under the system's temporary directory: the data-source file directory the suite allows
    folder = Path(tempfile.mkdtemp(prefix="agentkb-duckdb-"))
    write_duckdb(folder / "shop.duckdb")
    with sqlite3.connect(folder / "stock.db") as conn:
        conn.execute("CREATE TABLE stock (item_id INTEGER, boxes INTEGER)")
        conn.executemany("INSERT INTO stock VALUES (?, ?)", [(1, 10), (3, 0)])
    conn.close()
    tag = folder.name.rsplit("-", 1)[-1].lower()
    found = World(folder, f"ddb_{tag}", f"lite_{tag}", f"ddbkb_{tag}")
    with httpx.Client(base_url=base_url, timeout=120) as c:
        r = c.post(
            "/api/databases",
            json={
                "database": {
                    "name": found.ddb,
                    "engine": "duckdb",
                    "parameters": {"database": str(folder / "shop.duckdb"), "read_only": True},
                }
            },
        )
        assert r.status_code == 201, r.text
        ok(
            c,
            f"CREATE DATABASE {found.lite} WITH ENGINE = 'sqlite', PARAMETERS = {{'db_file': '{folder}/stock.db'}}",
        )
        stub_kb(c, found.kb, stub)
        ok(c, f"INSERT INTO {found.kb} SELECT id, body AS content FROM {found.ddb}.docs")
        yield found
        c.delete(f"{P}/knowledge_bases/{found.kb}")
        c.delete(f"/api/databases/{found.ddb}")
        c.delete(f"/api/databases/{found.lite}")
    shutil.rmtree(folder, ignore_errors=True)


def test_a_duckdb_source_is_listed_and_its_tables_shown(client: httpx.Client, world: World) -> None:
    listed = client.get(f"/api/databases/{world.ddb}").json()
    assert listed["engine"] == "duckdb" and listed["name"] == world.ddb
    tables = rows(client, f"SHOW TABLES FROM {world.ddb}")
    assert [next(iter(t.values())) for t in tables] == [
        "docs",
        "items",
    ]  # tables (views are not listed, as for every engine)


def test_pushed_down_selects_render_as_duckdb(client: httpx.Client, world: World) -> None:
    got = rows(
        client, f"SELECT id, name, price FROM {world.ddb}.items WHERE ok = true ORDER BY id DESC LIMIT 5"
    )
    assert got == [{"id": 3, "name": "cherry", "price": 4.0}, {"id": 1, "name": "apple", "price": 1.5}]
    counted = rows(client, f"SELECT count(*) AS n FROM {world.ddb}.items WHERE name LIKE '%an%'")
    assert counted == [{"n": 1}]
    native = rows(client, f"SELECT * FROM {world.ddb} (SELECT name, id * 10 AS tens FROM items WHERE id = 2)")
    assert native == [{"name": "banana", "tens": 20}]


def test_insert_into_a_kb_from_duckdb(client: httpx.Client, world: World) -> None:
    stored = rows(client, f"SELECT id, chunk_content FROM {world.kb} ORDER BY id")
    assert [(r["id"], r["chunk_content"]) for r in stored] == [
        (1, "Apples grow on trees"),
        (2, "Bananas are yellow"),
        (3, "Cherries are small and red"),
    ]


def test_joins_with_a_kb_and_another_source(client: httpx.Client, world: World) -> None:
    with_kb = rows(
        client,
        f"SELECT k.id, i.name, i.price FROM {world.kb} AS k JOIN {world.ddb}.items AS i ON i.id = k.id "
        "WHERE i.ok = true ORDER BY i.id",
    )
    assert with_kb == [
        {"id": 1, "name": "apple", "price": 1.5},
        {"id": 3, "name": "cherry", "price": 4.0},
    ]
    across = rows(
        client,
        f"SELECT i.name, s.boxes FROM {world.ddb}.items AS i JOIN {world.lite}.stock AS s ON s.item_id = i.id "
        "ORDER BY i.id",
    )
    assert across == [{"name": "apple", "boxes": 10}, {"name": "cherry", "boxes": 0}]


def test_an_agent_reads_duckdb_tables(client: httpx.Client, stub: OpenAIStub, world: World) -> None:
    agent = f"shop_agent_{world.ddb}"
    r = client.post(
        f"{P}/agents",
        json={"agent": {"name": agent, "model": stub.chat_model(), "data": {"tables": [f"{world.ddb}.i*"]}}},
    )
    assert r.status_code == 201, r.text
    stub.script(
        tool_call("sql_db_list_tables", ""),
        tool_call("sql_db_schema", f"{world.ddb}.items"),
        tool_call("sql_db_query", f"SELECT name FROM {world.ddb}.Items WHERE ok = true ORDER BY id"),
        tool_call("sql_db_query", f"SELECT * FROM {world.ddb}.docs"),
        tool_call("sql_db_query", "SELECT content FROM read_text('/etc/passwd')"),
        tool_call("sql_db_query", f"SELECT read_text('/etc/passwd') AS t FROM {world.ddb}.items"),
        text("done"),
    )
    reply = client.post(
        f"{P}/agents/{agent}/completions", json={"messages": [{"question": "go", "answer": None}]}
    )
    assert reply.status_code == 200, reply.text
    listed, schema, named, other, table_function, function = [
        str(m["content"]) for m in stub.requests[-1].messages if m.get("role") == "tool"
    ]
    assert listed == f"{world.ddb}.items"
    assert "`id` : `INTEGER`" in schema and "`price` : `DECIMAL(6,2)`" in schema and "apple" in schema
    assert named.endswith("name\r\napple\r\ncherry\r\n")
    assert other.startswith(f"Error: Table {world.ddb}.docs not found")
    assert "read_text() is not allowed" in table_function
    assert "read_text() is not allowed" in function
    assert "root:" not in table_function + function


def test_file_functions_are_refused_through_the_source(client: httpx.Client, world: World) -> None:
    d = world.ddb
    for query in (
        f"SELECT * FROM {d}.items WHERE name IN (SELECT content FROM read_text('/etc/passwd'))",
        f"SELECT read_text('/etc/passwd') FROM {d}.items",
        f"SELECT * FROM {d} (SELECT * FROM read_csv('/etc/passwd'))",
        f"SELECT * FROM {d} (SELECT * FROM glob('/etc/*'))",
    ):
        assert "is not allowed" in error(client, query), query
    for query in (
        f"SELECT * FROM {d} (ATTACH '/tmp/other.duckdb' AS o)",
        f"SELECT * FROM {d} (INSTALL httpfs)",
        f"SELECT * FROM {d} (LOAD httpfs)",
        f"SELECT * FROM {d} (SET enable_external_access = true)",
    ):
        assert re.search("Only SELECT queries are allowed|not allowed", error(client, query)), query
    # a view stored in the file: only DuckDB can see what it reads, and external access is off
    leaked = error(client, f"SELECT * FROM {d}.leak")
    assert "file system operations are disabled" in leaked and "root:" not in leaked


def test_files_outside_the_directory_and_network_databases_are_refused(
    client: httpx.Client, unique: str
) -> None:
    # refused when stored, even unchecked (REST's default), as every data source's destination
    for database in ("/etc/passwd", "../../../../etc/shop.duckdb"):
        r = client.post(
            "/api/databases",
            json={
                "database": {
                    "name": f"bad_{unique}",
                    "engine": "duckdb",
                    "parameters": {"database": database},
                }
            },
        )
        assert "outside the data-source file directory" in assert_problem(r, 400)["detail"]
    assert client.get(f"/api/databases/bad_{unique}").status_code == 404
    # refused when connecting (SQL's CREATE DATABASE connects first, as MindsDB's)
    for parameters, why in (
        ("{'database': 'md:shop', 'motherduck_token': 'secret-token'}", "MotherDuck"),
        ("{'database': 'md:shop'}", "must be a file under the data-source directory"),
        ("{'database': 's3://bucket/shop.duckdb'}", "must be a file under the data-source directory"),
        ("{'database': ':memory:'}", "in-memory"),
        ("{'read_only': true}", "'database' is required"),
    ):
        message = error(
            client, f"CREATE DATABASE bad_{unique} WITH ENGINE = 'duckdb', PARAMETERS = {parameters}"
        )
        assert why in message and "secret-token" not in message, message
    assert client.get(f"/api/databases/bad_{unique}").status_code == 404


def test_the_duckdb_connection_is_locked_down(tmp_path: Path) -> None:
    write_duckdb(tmp_path / "shop.duckdb")
    policy = DataSourcePolicy(file_dir=tmp_path)
    engine = datasources.create("duckdb", {"database": "shop.duckdb"}, policy)
    refused = (
        f"ATTACH '{tmp_path / 'other.duckdb'}' AS o",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "RESET enable_external_access",
        "SELECT * FROM read_csv('/etc/passwd')",
        f"COPY items TO '{tmp_path / 'out.csv'}'",
        "CREATE TABLE more (a INTEGER)",
        "INSERT INTO items VALUES (9, 'x', true, 1)",
    )
    try:
        for query in refused:
            with engine.connect() as conn, pytest.raises(Exception) as caught:
                conn.exec_driver_sql(query)
            message = str(caught.value)
            assert any(
                why in message
                for why in ("disabled by configuration", "read-only", "locked", "Permission Error", "Cannot")
            ), (query, message)
        rendered = pushdown.parse_select("SELECT name FROM ddb.items WHERE id = 1").render("duckdb")
        assert list(pushdown.stream_rows(engine, rendered)) == [(["name"], [{"name": "apple"}])]
    finally:
        engine.dispose()
    assert not (tmp_path / "other.duckdb").exists() and not (tmp_path / "out.csv").exists()
    with pytest.raises(BadRequest, match="outside the data-source file directory"):
        datasources.create("duckdb", {"database": "/etc/shop.duckdb"}, policy)


def test_a_long_duckdb_query_is_interrupted(tmp_path: Path) -> None:
    write_duckdb(tmp_path / "shop.duckdb")
    engine = datasources.create("duckdb", {"database": "shop.duckdb"}, DataSourcePolicy(file_dir=tmp_path))
    endless = "SELECT count(*) AS n FROM range(100000000000) AS a(x)"
    try:
        with pytest.raises(BadRequest, match="INTERRUPT|nterrupt"):
            list(pushdown.stream_rows(engine, endless, timeout_s=0.2))
    finally:
        engine.dispose()
