"""`POST /api/sql/query` SELECTs beyond one search: MindsDB's KB WHERE algebra, metadata columns, and the
planner (joins of KBs, files, data-source tables and agents; GROUP BY, ORDER BY, UNION, subqueries, CTEs,
native queries), over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests import externals
from tests.helpers import KB_SELECT_COLUMNS, sql
from tests.helpers import sql_error as error
from tests.helpers import sql_rows as rows

FRUIT = [
    (1, "Apples are crisp red fruit from orchards.", "red", "big"),
    (2, "Cherries are small red stone fruit.", "red", "small"),
    (3, "Blueberries are tiny blue berries.", "blue", "small"),
    (4, "Plums are purple or blue stone fruit.", "blue", "big"),
]


@pytest.fixture(scope="module")
def world(base_url: str, pg_source: dict[str, Any]) -> Iterator[dict[str, str]]:
    """A KB of fruit (inserted metadata color, size), an uploaded CSV and a postgres table about them."""
    import uuid

    u = uuid.uuid4().hex[:8]
    names = {"kb": f"fruit_{u}", "file": f"prices_{u}", "ds": f"shop_{u}", "table": f"stock_{u}"}
    with httpx.Client(base_url=base_url, timeout=120) as client:
        assert sql(client, f"CREATE KNOWLEDGE_BASE {names['kb']}")["type"] == "ok"
        values = ", ".join(f"({i}, '{text}', '{color}', '{size}')" for i, text, color, size in FRUIT)
        insert = sql(client, f"INSERT INTO {names['kb']} (id, content, color, size) VALUES {values}")
        assert insert["type"] == "ok", insert
        csv = b"id,price\n1,1.5\n2,4.0\n3,6.25\n"
        r = client.put(
            f"/api/files/{names['file']}",
            files={"file": (f"{names['file']}.csv", csv)},
            data={"original_file_name": f"{names['file']}.csv"},
        )
        assert r.status_code == 200, r.text
        externals.execute(
            "postgres",
            pg_source,
            f"CREATE TABLE {names['table']} (fruit_id INT PRIMARY KEY, boxes INT)",
            f"INSERT INTO {names['table']} VALUES (1, 10), (2, 0), (4, 7), (99, 1)",
        )
        ok = sql(
            client, f"CREATE DATABASE {names['ds']} WITH ENGINE = 'postgres', PARAMETERS = {pg_source!r}"
        )
        assert ok["type"] == "ok", ok
        yield names
        sql(client, f"DROP KNOWLEDGE_BASE {names['kb']}")
        sql(client, f"DROP DATABASE {names['ds']}")
        externals.execute("postgres", pg_source, f"DROP TABLE {names['table']}")


def test_select_star_has_the_metadata_columns(client: httpx.Client, world: dict[str, str]) -> None:
    answer = sql(client, f"SELECT * FROM {world['kb']} WHERE id = 1")
    assert answer["column_names"] == [*KB_SELECT_COLUMNS, "color", "size", "metadata"]
    row = dict(zip(answer["column_names"], answer["data"][0], strict=True))
    assert (row["color"], row["size"], row["metadata"]["color"]) == ("red", "big", "red")
    picked = rows(client, f"SELECT id AS i, metadata->>'color' AS c FROM {world['kb']} WHERE id = 2")
    assert picked == [{"i": 2, "c": "red"}]


def test_unknown_metadata_column_is_an_error(client: httpx.Client, world: dict[str, str]) -> None:
    assert error(client, f"SELECT * FROM {world['kb']} WHERE shade = 'red'") == "Column is not found: shade"
    assert "Column is not found: shade" in error(
        client, f"SELECT * FROM {world['kb']} WHERE color = 'red' OR (metadata->>'shade') = 'x'"
    )
    assert len(rows(client, f"SELECT * FROM {world['kb']} WHERE _original_doc_id = 3")) == 1  # system keys
    assert rows(client, f"SELECT id FROM {world['kb']} WHERE color = 'green'") == []


def test_or_not_and_content_algebra(client: httpx.Client, world: dict[str, str]) -> None:
    kb = world["kb"]
    got = rows(client, f"SELECT id FROM {kb} WHERE (color = 'red' AND size = 'small') OR id = 3")
    assert sorted(r["id"] for r in got) == [2, 3]
    assert sorted(r["id"] for r in rows(client, f"SELECT id FROM {kb} WHERE NOT color = 'red'")) == [3, 4]
    assert sorted(r["id"] for r in rows(client, f"SELECT id FROM {kb} WHERE NOT (id < 2 OR id > 3)")) == [
        2,
        3,
    ]
    # content IN: one search per value, their union
    both = rows(client, f"SELECT id FROM {kb} WHERE content IN ('apples', 'blueberries') LIMIT 2")
    assert len(both) == 2
    assert rows(client, f"SELECT id FROM {kb} WHERE content IS NULL") == []
    # content != excludes the chunks of that search (MindsDB: its top 100 with relevance >= 0.5)
    kept = rows(client, f"SELECT chunk_content FROM {kb} WHERE content = 'fruit' AND content != 'cherries'")
    assert all("Cherries" not in r["chunk_content"] for r in kept)
    kept = rows(client, f"SELECT id FROM {kb} WHERE content NOT IN ('cherries') AND size = 'small'")
    assert 2 not in {r["id"] for r in kept}


def test_order_group_and_expressions_over_a_kb(client: httpx.Client, world: dict[str, str]) -> None:
    kb = world["kb"]
    assert [r["id"] for r in rows(client, f"SELECT id FROM {kb} ORDER BY id DESC LIMIT 3")] == [4, 3, 2]
    grouped = rows(
        client, f"SELECT color, count(*) AS n, max(id) AS top FROM {kb} GROUP BY color ORDER BY color"
    )
    assert grouped == [{"color": "blue", "n": 2, "top": 4}, {"color": "red", "n": 2, "top": 2}]
    searched = rows(client, f"SELECT id, relevance FROM {kb} WHERE content = 'berries' ORDER BY id LIMIT 2")
    assert len(searched) == 2 and searched[0]["id"] < searched[1]["id"]
    assert rows(client, f"SELECT DISTINCT size FROM {kb} ORDER BY size") == [
        {"size": "big"},
        {"size": "small"},
    ]
    assert rows(client, f"SELECT upper(color) AS c FROM {kb} WHERE id = 3") == [{"c": "BLUE"}]


def test_joins(client: httpx.Client, world: dict[str, str]) -> None:
    kb, file, ds, table = world["kb"], world["file"], world["ds"], world["table"]
    priced = rows(
        client,
        f"SELECT k.id, k.color, p.price FROM {kb} k JOIN files.{file} p ON p.id = k.id "
        "WHERE k.size = 'small' ORDER BY k.id",
    )
    assert priced == [{"id": 2, "color": "red", "price": 4.0}, {"id": 3, "color": "blue", "price": 6.25}]
    stocked = rows(
        client,
        f"SELECT k.id, s.boxes FROM {kb} AS k JOIN {ds}.{table} AS s ON s.fruit_id = k.id "
        "WHERE s.boxes > 0 ORDER BY k.id",
    )
    assert stocked == [{"id": 1, "boxes": 10}, {"id": 4, "boxes": 7}]
    left = rows(
        client,
        f"SELECT k.id, p.price FROM {kb} k LEFT JOIN files.{file} p ON p.id = k.id "
        "WHERE k.color = 'blue' ORDER BY k.id",
    )
    assert left == [{"id": 3, "price": 6.25}, {"id": 4, "price": None}]
    three = rows(
        client,
        f"SELECT p.id, p.price, s.boxes FROM files.{file} p JOIN {ds}.{table} s ON s.fruit_id = p.id "
        f"JOIN {kb} k ON k.id = p.id WHERE k.content = 'red fruit' ORDER BY p.id",
    )
    assert [r["id"] for r in three] == [1, 2]


def test_union_subqueries_ctes_and_native_queries(client: httpx.Client, world: dict[str, str]) -> None:
    kb, file, ds, table = world["kb"], world["file"], world["ds"], world["table"]
    union = rows(
        client,
        f"SELECT id FROM {kb} WHERE color = 'red' UNION ALL SELECT id FROM files.{file} WHERE price > 5",
    )
    assert sorted(r["id"] for r in union) == [1, 2, 3]
    sub = rows(client, f"SELECT t.id FROM (SELECT * FROM {kb} WHERE color = 'blue') AS t WHERE t.id > 3")
    assert sub == [{"id": 4}]
    cte = rows(
        client, f"WITH b AS (SELECT id, size FROM {kb} WHERE size = 'big') SELECT count(*) AS n FROM b"
    )
    assert cte == [{"n": 2}]
    native = rows(
        client, f"SELECT * FROM {ds} (SELECT fruit_id, boxes * 2 AS twice FROM {table} WHERE boxes > 7)"
    )
    assert native == [{"fruit_id": 1, "twice": 20}]
    assert "Only SELECT queries are allowed" in error(client, f"SELECT * FROM {ds} (DELETE FROM {table})")


def test_refusals_name_what_to_do(client: httpx.Client, world: dict[str, str]) -> None:
    kb = world["kb"]
    assert "Subqueries" in error(client, f"SELECT * FROM {kb} WHERE id IN (SELECT 1)")
    assert "aliases" in error(client, f"SELECT * FROM {kb} JOIN {kb} ON 1 = 1")


def test_agent_answers_each_row_of_a_joined_table(client: httpx.Client, world: dict[str, str]) -> None:
    agent, questions = f"{world['kb']}_agent", f"{world['file']}_q"
    created = sql(
        client,
        f"CREATE AGENT {agent} USING model = {{'provider': 'extractive', 'model_name': 'extractive'}}, "
        f"data = {{'knowledge_bases': ['mindsdb.{world['kb']}']}}",
    )
    assert created["type"] == "ok", created
    csv = b"n,question\n1,Which fruit is crisp?\n2,Which berries are blue?\n3,\n"
    r = client.put(
        f"/api/files/{questions}",
        files={"file": (f"{questions}.csv", csv)},
        data={"original_file_name": f"{questions}.csv"},
    )
    assert r.status_code == 200, r.text
    try:
        # no ON: the table's own `question` column (MindsDB maps the row to the agent's input)
        answered = rows(client, f"SELECT t.n, a.answer FROM files.{questions} t JOIN {agent} a ORDER BY t.n")
        assert [r["n"] for r in answered] == [1, 2]  # the empty question is no row
        assert all(isinstance(r["answer"], str) and r["answer"] for r in answered)
        one = rows(
            client,
            f"SELECT a.question, a.answer FROM files.{questions} t JOIN {agent} a ON a.question = t.question "
            "WHERE t.n = 2",
        )
        assert [r["question"] for r in one] == ["Which berries are blue?"]
    finally:
        sql(client, f"DROP AGENT {agent}")


def test_a_join_within_one_data_source_runs_there(client: httpx.Client, world: dict[str, str]) -> None:
    ds, table = world["ds"], world["table"]
    joined = rows(
        client,
        f"SELECT a.fruit_id, b.boxes FROM {ds}.{table} a JOIN {ds}.{table} b ON b.fruit_id = a.fruit_id "
        "WHERE a.boxes > 5 ORDER BY a.fruit_id",
    )
    assert joined == [{"fruit_id": 1, "boxes": 10}, {"fruit_id": 4, "boxes": 7}]
