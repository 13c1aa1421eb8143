"""The MindsDB Python SDK (mindsdb_sdk 3.5.0, unchanged) driving a served agentkb over real HTTP."""

from __future__ import annotations

from typing import Any

import pandas as pd
import psycopg
import pytest

mindsdb_sdk = pytest.importorskip("mindsdb_sdk", reason="install the dev extra: pip install -e '.[dev]'")


@pytest.fixture()
def server(base_url: str) -> Any:
    return mindsdb_sdk.connect(base_url)


@pytest.fixture()
def pg_table(unique: str) -> str:
    table = f"sdk_products_{unique}"
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, description TEXT, vendor TEXT)")
        conn.execute(
            f"INSERT INTO {table} VALUES (100, 'A cast-iron skillet that keeps heat for searing steak.', 'forge'), "
            "(101, 'Noise-cancelling headphones for long flights.', 'sonic')"
        )
    return table


def test_status_projects_and_databases(server: Any, unique: str) -> None:
    assert server.status()["mindsdb_version"]
    assert "mindsdb" in [p.name for p in server.list_projects()]
    project = server.create_project(f"sdkproj_{unique}")
    assert project.name in [p.name for p in server.list_projects()]
    server.drop_project(project.name)
    assert project.name not in [p.name for p in server.list_projects()]

    db = server.create_database(
        f"sdkpg_{unique}", engine="postgres",
        connection_args={"host": "127.0.0.1", "port": 5432, "user": "postgres", "database": "test"},
    )
    assert db.name in [d.name for d in server.list_databases()]
    server.drop_database(db.name)
    assert db.name not in [d.name for d in server.list_databases()]


def test_knowledge_base_session(server: Any, unique: str, pg_table: str) -> None:
    project = server.get_project("mindsdb")
    kb = project.knowledge_bases.create(
        f"sdk_kb_{unique}", metadata_columns=["vendor"], content_columns=["description"], id_column="id"
    )
    assert kb.name in [k.name for k in project.knowledge_bases.list()]

    kb.insert(pd.DataFrame([
        {"id": 1, "description": "A lightweight tent that sleeps two hikers.", "vendor": "trail"},
        {"id": 2, "description": "An espresso machine with a steam wand for milk.", "vendor": "brew"},
    ]))
    kb.insert({"id": 3, "description": "A mechanical keyboard with clicky switches.", "vendor": "keys"})

    source = server.create_database(
        f"sdk_src_{unique}", engine="postgres",
        connection_args={"host": "127.0.0.1", "port": 5432, "user": "postgres", "database": "test"},
    )
    kb.insert_query(source.tables.get(pg_table).filter(id=100))

    found = kb.find("camping gear for two people").fetch()
    assert list(found.columns[:6]) == ["id", "chunk_id", "chunk_content", "metadata", "distance", "relevance"]
    assert found.iloc[0]["id"] == 1
    assert kb.find("cooking a steak", limit=1).fetch().iloc[0]["id"] == 100
    assert len(kb.find("anything", limit=2).fetch()) == 2

    again = project.knowledge_bases.get(kb.name)
    assert again.metadata_columns == ["vendor"] and again.id_column == "id"
    project.knowledge_bases.drop(kb.name)
    assert kb.name not in [k.name for k in project.knowledge_bases.list()]
    server.drop_database(source.name)
