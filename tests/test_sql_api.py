"""`POST /api/sql/query`: MindsDB's SQL dialect over real HTTP (shapes as mindsdb_sdk parses them)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests import externals
from tests.helpers import KB_SELECT_COLUMNS, sql
from tests.helpers import sql_ok as ok
from tests.helpers import sql_rows as table


def test_sdk_catalog_queries(client: httpx.Client, unique: str, pg_source: dict[str, Any]) -> None:
    ok(client, f"CREATE DATABASE proj_{unique} WITH ENGINE = 'mindsdb', PARAMETERS = {{}}")
    projects = table(client, "select NAME from information_schema.databases where TYPE='project'")
    assert {"NAME": "mindsdb"} in projects and {"NAME": f"proj_{unique}"} in projects
    params = {**pg_source, "password": "pw"}
    ok(client, f"CREATE DATABASE pg_{unique} WITH ENGINE = 'postgres', PARAMETERS = {params!r}")
    sources = table(
        client, "select NAME, ENGINE, CONNECTION_DATA from information_schema.databases where TYPE='data'"
    )
    mine = [s for s in sources if s["NAME"] == f"pg_{unique}"]
    assert (
        mine
        and mine[0]["ENGINE"] == "postgres"
        and json.loads(mine[0]["CONNECTION_DATA"])["password"] == "******"
    )  # JSON text, as MindsDB
    assert {"Database": f"pg_{unique}"} in table(client, "SHOW DATABASES")
    ok(client, f"DROP DATABASE pg_{unique}")
    ok(client, f"DROP DATABASE proj_{unique}")
    assert {"NAME": f"proj_{unique}"} not in table(client, "select NAME from information_schema.databases")


def test_kb_lifecycle_in_sql(client: httpx.Client, unique: str) -> None:
    kb = f"sqlkb_{unique}"
    ok(
        client,
        f"CREATE KNOWLEDGE_BASE {kb} USING metadata_columns = ['topic'], content_columns = ['body'], "
        "id_column = 'id'",
    )
    ok(client, f"CREATE KNOWLEDGE_BASE IF NOT EXISTS {kb}")
    error = sql(client, f"CREATE KNOWLEDGE_BASE {kb}")
    assert (
        error["type"] == "error" and "already exists" in error["error_message"] and error["error_code"] == 0
    )
    ok(
        client,
        f"INSERT INTO {kb} (id, body, topic) VALUES (1, 'Whales sing long songs underwater.', 'sea'), "
        "(2, 'Glaciers carve valleys over thousands of years.', 'ice')",
    )
    answer = sql(client, f"SELECT * FROM mindsdb.{kb} WHERE content = 'ocean animals singing' LIMIT 10")
    # MindsDB's order: the declared metadata columns come as columns too, before `metadata`
    assert answer["column_names"] == [*KB_SELECT_COLUMNS, "topic", "metadata"]
    hits = [dict(zip(answer["column_names"], row, strict=True)) for row in answer["data"]]
    assert hits[0]["id"] == 1 and hits[0]["topic"] == "sea"
    assert hits[0]["metadata"]["topic"] == "sea"
    filtered = table(client, f"SELECT id, chunk_content FROM {kb} WHERE content = 'nature' AND topic = 'ice'")
    assert [h["id"] for h in filtered] == [2] and set(filtered[0]) == {"id", "chunk_content"}
    everything = table(client, f"SELECT * FROM {kb}")
    assert {h["id"] for h in everything} == {1, 2} and everything[0]["relevance"] is None
    assert table(client, f"SHOW KNOWLEDGE_BASES WHERE name = '{kb}'")[0]["NAME"] == kb
    assert any(r["NAME"] == kb for r in table(client, "SELECT * FROM information_schema.knowledge_bases"))
    ok(client, f"DELETE FROM {kb} WHERE id = 1")
    assert {h["id"] for h in table(client, f"SELECT * FROM {kb}")} == {2}
    ok(client, f"DROP KNOWLEDGE_BASE {kb}")
    assert sql(client, f"SELECT * FROM {kb}")["type"] == "error"


def test_insert_select_and_pushdown(client: httpx.Client, unique: str, pg_source: dict[str, Any]) -> None:
    t = f"facts_{unique}"
    externals.execute(
        "postgres",
        pg_source,
        f"CREATE TABLE {t} (id INT PRIMARY KEY, body TEXT, price NUMERIC(6,2))",
        f"INSERT INTO {t} VALUES (1, 'Tea is brewed from leaves.', 3.50), (2, 'Coffee comes from beans.', 4)",
    )
    ds = f"src_{unique}"
    ok(client, f"CREATE DATABASE {ds} WITH ENGINE = 'postgres', PARAMETERS = {pg_source!r}")
    rows = table(client, f"SELECT id, body, price FROM {ds}.{t} ORDER BY id")
    assert rows == [
        {"id": 1, "body": "Tea is brewed from leaves.", "price": 3.5},
        {"id": 2, "body": "Coffee comes from beans.", "price": 4},
    ]
    kb = f"facts_kb_{unique}"
    ok(client, f"CREATE KNOWLEDGE_BASE {kb} USING content_columns = ['body']")
    assert ok(client, f"INSERT INTO {kb} SELECT id, body FROM {ds}.{t}")["affected_rows"] == 2
    assert table(client, f"SELECT id FROM {kb} WHERE content = 'beans' LIMIT 1") == [{"id": 2}]
    refused = sql(client, f"SELECT * FROM {ds}.{t}; DROP TABLE {t}")
    assert refused["type"] == "error"


def test_agents_in_sql_and_errors(client: httpx.Client, unique: str) -> None:
    ag = f"sqlagent_{unique}"
    ok(
        client,
        f"CREATE AGENT {ag} USING model = {{'provider': 'extractive', 'model_name': 'extractive'}}, "
        "data = {'knowledge_bases': ['mindsdb.*']}, prompt_template = 'answer from the docs'",
    )
    agents = table(client, f"SHOW AGENTS WHERE name = '{ag}'")
    assert agents[0]["PROVIDER"] == "extractive" and agents[0]["PROMPT_TEMPLATE"] == "answer from the docs"
    record = client.get(f"/api/projects/mindsdb/agents/{ag}").json()
    assert record["data"] == {"knowledge_bases": ["mindsdb.*"], "tables": []}
    ok(client, f"DROP AGENT {ag}")
    for bad in (
        "UPDATE x SET a = 1",
        "SELEC nonsense",
        "SELECT * FROM no_such_thing.t",
        "CREATE TABLE t (a int)",
    ):
        answer = sql(client, bad)
        assert answer["type"] == "error" and answer["error_message"], (bad, answer)


def test_files_and_tables_as_mindsdb_exposes_them(
    client: httpx.Client, unique: str, pg_source: dict[str, Any]
) -> None:
    name = f"sqlfile_{unique}"
    csv = b"id,fruit,price\n1,apple,1.5\n2,pear,2.25\n"
    r = client.put(
        f"/api/files/{name}", files={"file": (f"{name}.csv", csv)}, data={"original_file_name": f"{name}.csv"}
    )
    assert r.status_code == 200, r.text
    sources = table(client, "select NAME, ENGINE from information_schema.databases where TYPE='data'")
    assert {"NAME": "files", "ENGINE": "files"} in sources
    assert [r["fruit"] for r in table(client, f"SELECT fruit FROM files.{name} WHERE price > 2")] == ["pear"]
    assert {"Tables_in_files": name} in table(client, "SHOW TABLES", db="files")

    t = f"ctx_{unique}"
    externals.execute(
        "postgres", pg_source, f"CREATE TABLE {t} (id INT PRIMARY KEY)", f"INSERT INTO {t} VALUES (7)"
    )
    ds = f"ctx_src_{unique}"
    ok(client, f"CREATE DATABASE {ds} WITH ENGINE = 'postgres', PARAMETERS = {pg_source!r}")
    assert table(client, f"SELECT id FROM {t}", db=ds) == [{"id": 7}]  # bare table in the source's context
    assert {f"Tables_in_{ds}": t} in table(client, "SHOW TABLES", db=ds)
