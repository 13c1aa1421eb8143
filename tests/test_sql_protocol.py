"""`POST /api/sql/query`'s protocol beyond one statement: `params` in every statement kind, the streamed
`response_format`s, and `POST /api/sql/query/utils/parametrize_constants`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest


def post(client: httpx.Client, query: str, **extra: Any) -> httpx.Response:
    r = client.post("/api/sql/query", json={"query": query, **extra})
    assert r.status_code == 200, r.text
    return r


def test_params_bind_in_every_statement_kind(client: httpx.Client, unique: str, tmp_path: Path) -> None:
    db_file = tmp_path / "shop.db"
    with sqlite3.connect(db_file) as conn:
        conn.execute("CREATE TABLE items (id INTEGER, name TEXT)")
        conn.executemany("INSERT INTO items VALUES (?, ?)", [(1, "pen"), (2, "ink"), (3, "cap")])
    name = f"shop_{unique}"
    create = f"CREATE DATABASE {name} WITH ENGINE = 'sqlite', PARAMETERS = {{'db_file': @shop_file}}"
    assert post(client, create, params={"shop_file": str(db_file)}).json()["type"] == "ok"
    try:
        # pushed down to the data source: WHERE, IN :list, the select list
        answer = post(
            client,
            f"SELECT id, :tag AS tag FROM {name}.items WHERE name IN :names AND id > :low ORDER BY id",
            params={"tag": "t", "names": ["pen", "cap"], "low": 0},
        ).json()
        assert answer["data"] == [[1, "t"], [3, "t"]], answer
        # information_schema
        answer = post(
            client,
            "SELECT NAME, CONNECTION_DATA FROM information_schema.databases WHERE NAME = :n",
            params={"n": name},
        ).json()
        assert answer["data"][0][0] == name and json.loads(answer["data"][0][1]) == {"db_file": str(db_file)}
        # unbound: MindsDB's message, a 200 error answer
        missing = post(client, f"SELECT * FROM {name}.items WHERE id = :id", params={}).json()
        assert missing["type"] == "error" and missing["error_message"] == "Parameter is not set: id"
        unknown = post(
            client, "CREATE DATABASE x WITH ENGINE = 'sqlite', PARAMETERS = {'db_file': @nope}"
        ).json()
        assert unknown["type"] == "error" and "Variable nope is not defined" in unknown["error_message"]
    finally:
        post(client, f"DROP DATABASE {name}")


def test_log_is_a_system_database(client: httpx.Client) -> None:
    rows = post(client, "SELECT NAME, TYPE FROM information_schema.databases WHERE TYPE = 'system'").json()[
        "data"
    ]
    assert rows == [["information_schema", "system"], ["log", "system"]]


@pytest.mark.parametrize("response_format", ["jsonlines", "sse"])
def test_streamed_formats(client: httpx.Client, response_format: str) -> None:
    def lines(query: str) -> list[Any]:
        r = post(client, query, response_format=response_format)
        text = r.text
        if response_format == "sse":
            assert r.headers["content-type"].startswith("text/event-stream")
            assert text.endswith("\n\n") and all(
                line.startswith("data: ") for line in text.split("\n\n")[:-1]
            )
            text = text.replace("data: ", "").replace("\n\n", "\n")
        else:
            assert r.headers["content-type"] == "application/jsonlines"
        assert text.endswith("\n")
        return [json.loads(line) for line in text.splitlines()]

    header, rows = lines("SELECT NAME, TYPE FROM information_schema.databases WHERE TYPE = 'system'")
    assert header == {"type": "table", "column_names": ["NAME", "TYPE"]}
    assert rows == [["information_schema", "system"], ["log", "system"]]
    assert lines("SELECT * FROM information_schema.databases WHERE NAME = 'nothing'") == [
        {"type": "table", "column_names": ["NAME", "TYPE", "ENGINE", "CONNECTION_DATA"]}
    ]
    (error,) = lines("SELEC 1")
    assert error["type"] == "error" and error["error_code"] == 0 and "context" in error
    (done,) = lines("USE mindsdb")
    assert done["type"] == "ok" and done["context"]["db"] == "mindsdb"


def test_unknown_response_format_is_refused(client: httpx.Client) -> None:
    r = client.post("/api/sql/query", json={"query": "SHOW DATABASES", "response_format": "csv"})
    assert r.status_code == 400 and r.headers["content-type"].startswith("application/problem+json")


def test_parametrize_constants(client: httpx.Client) -> None:
    r = client.post(
        "/api/sql/query/utils/parametrize_constants",
        json={"query": "SELECT * FROM pg.orders WHERE status = 'open' AND total > 10"},
    )
    assert r.status_code == 200, r.text
    assert r.json() == {
        "query": "SELECT * FROM pg.orders WHERE status = :status AND total > :total",
        "parameters": [
            {"name": "status", "value": "open", "type": "str"},
            {"name": "total", "value": 10, "type": "int"},
        ],
        "databases": {"pg": ["orders"]},
    }
    bad = client.post("/api/sql/query/utils/parametrize_constants", json={"query": "SELEC nothing"})
    assert bad.status_code == 400 and bad.json()["title"] == "Invalid SQL"
