"""SQL statements that change or describe what exists (service/sql/ddl.py, service/catalog/kb_admin.py): UPDATE of a
KB chunk, DESCRIBE, ALTER KNOWLEDGE_BASE (and the REST PUT with settings), CREATE INDEX ON KNOWLEDGE_BASE,
SHOW TABLES FROM agentkb_pgvector, and MindsDB's name rules (ALTER DATABASE, UPDATE AGENT, DROP DATABASE)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import psycopg

from tests.helpers import TIMESTAMP, assert_problem
from tests.openai_stub import OpenAIStub
from tests.test_sql_api import ok, sql, table

P = "/api/projects/mindsdb"


def error(client: httpx.Client, query: str) -> str:
    answer = sql(client, query)
    assert answer["type"] == "error", answer
    return str(answer["error_message"])


def make_kb(client: httpx.Client, stub: OpenAIStub, name: str, **using: Any) -> None:
    fields = {"embedding_model": stub.embedding_model(), **using}
    ok(
        client,
        f"CREATE KNOWLEDGE_BASE {name} USING "
        + ", ".join(f"{k} = {json.dumps(v)}" for k, v in fields.items()),
    )


def record(client: httpx.Client, kb: str) -> dict[str, Any]:
    r = client.get(f"{P}/knowledge_bases/{kb}")
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def embedded_texts(stub: OpenAIStub) -> list[str]:
    return [t for r in stub.requests if r.path.endswith("/embeddings") for t in r.body["input"]]


# --- UPDATE <kb> SET content = … WHERE chunk_id = … ---------------------------------------------------------
def test_update_chunk(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    kb = f"upd_{unique}"
    make_kb(client, stub, kb, metadata_columns=["tag"])
    ok(
        client,
        f"INSERT INTO {kb} (id, content, tag) VALUES (1, 'a cat sat on the mat', 'pets'), (2, 'rain', 'x')",
    )
    [row] = table(client, f"SELECT * FROM {kb} WHERE id = 1")
    stub.reset()

    answer = ok(client, f"UPDATE {kb} SET content = 'a dog barked' WHERE chunk_id = '{row['chunk_id']}'")
    assert answer["affected_rows"] == 1
    assert embedded_texts(stub) == ["a dog barked"]  # the new text, embedded once
    [updated] = table(client, f"SELECT * FROM {kb} WHERE id = 1")
    assert updated["chunk_id"] == row["chunk_id"] and updated["chunk_content"] == "a dog barked"
    assert updated["metadata"]["tag"] == "pets"  # kept (MindsDB empties metadata not given)
    hits = table(
        client, f"SELECT * FROM {kb} WHERE content = 'a dog barked' AND hybrid_search = false LIMIT 1"
    )
    assert hits[0]["id"] == 1  # the new vector is the one searched

    ok(
        client,
        f"UPDATE mindsdb.{kb} SET metadata = '{{\"tag\": \"dogs\"}}' WHERE chunk_id = '{row['chunk_id']}'",
    )
    [updated] = table(client, f"SELECT * FROM {kb} WHERE id = 1")
    assert updated["metadata"]["tag"] == "dogs" and updated["chunk_content"] == "a dog barked"
    assert table(client, f"SELECT * FROM {kb} WHERE tag = 'dogs'")[0]["id"] == 1

    assert ok(client, f"UPDATE {kb} SET content = 'x' WHERE chunk_id = 'nope'")["affected_rows"] == 0
    assert "WHERE chunk_id" in error(client, f"UPDATE {kb} SET content = 'x' WHERE id = 1")
    assert "content and/or metadata" in error(client, f"UPDATE {kb} SET tag = 'x' WHERE chunk_id = 'a'")
    assert "knowledge bases only" in error(client, "UPDATE nowhere_table SET a = 1 WHERE b = 2")


# --- DESCRIBE -----------------------------------------------------------------------------------------------
def test_describe_knowledge_base(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    kb = f"desc_{unique}"
    make_kb(client, stub, kb, content_columns=["body"])
    [before] = table(client, f"DESCRIBE KNOWLEDGE_BASE {kb}")
    assert before["NAME"] == kb and before["PROJECT"] == "mindsdb"
    assert json.loads(before["EMBEDDING_MODEL"])["api_key"] == "******"  # JSON text, masked
    assert before["RERANKING_MODEL"] == "{}" and json.loads(before["CONTENT_COLUMNS"]) == ["body"]
    assert before["STORAGE"].startswith("agentkb_pgvector.kb_chunks_")
    assert [
        before[k] for k in ("INSERT_STARTED_AT", "INSERT_FINISHED_AT", "PROCESSED_ROWS", "ERROR", "QUERY_ID")
    ] == [None] * 5

    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": [{"id": 1, "body": "x"}]}})
    assert r.status_code == 200, r.text
    [after] = table(client, f"describe knowledge base mindsdb.{kb}")
    assert after["QUERY_ID"] == r.headers["X-Agentkb-Job"] and after["PROCESSED_ROWS"] == 1
    assert after["ERROR"] is None
    assert TIMESTAMP.match(after["INSERT_STARTED_AT"]) and TIMESTAMP.match(after["INSERT_FINISHED_AT"])
    assert table(client, f"DESCRIBE {kb}")[0]["QUERY_ID"] == after["QUERY_ID"]  # no kind: a KB by that name
    assert table(client, f"DESCRIBE KNOWLEDGE_BASE missing_{unique}") == []  # MindsDB: nothing matched
    assert "agentkb has no models" in error(client, f"DESCRIBE MODEL {kb}")


def test_describe_agent_and_database(client: httpx.Client, unique: str) -> None:
    ok(
        client,
        f"CREATE AGENT ag_{unique} USING model = {{'provider': 'extractive', 'model_name': 'extractive'}}",
    )
    [agent] = table(client, f"DESCRIBE AGENT ag_{unique}")
    assert agent["NAME"] == f"ag_{unique}" and agent["PROVIDER"] == "extractive"
    assert table(client, "DESCRIBE DATABASE mindsdb") == [
        {"NAME": "mindsdb", "TYPE": "project", "ENGINE": None, "CONNECTION_DATA": None}
    ]


# --- ALTER KNOWLEDGE_BASE and the REST PUT with settings ------------------------------------------------------
def test_alter_knowledge_base(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    kb = f"alt_{unique}"
    make_kb(client, stub, kb, reranking_model={"provider": "openai", "model_name": "r1", "api_key": "k1"})
    ok(
        client,
        f"ALTER KNOWLEDGE_BASE {kb} USING reranking_model = {{'api_key': 'k2'}}, "
        "embedding_model = {'api_key': 'e2'}, id_column = 'my_id', content_columns = ['c'], "
        "metadata_columns = ['m']",
    )
    rec = record(client, kb)
    assert rec["reranking_model"] == {"provider": "openai", "model_name": "r1", "api_key": "******"}
    assert (rec["id_column"], rec["content_columns"], rec["metadata_columns"]) == ("my_id", ["c"], ["m"])
    stub.reset()
    ok(client, f"INSERT INTO {kb} (my_id, c, m) VALUES (1, 'cat', 'x')")
    assert stub.requests[-1].headers["authorization"] == "Bearer e2"  # the merged key embeds

    message = error(client, f"ALTER KNOWLEDGE_BASE {kb} USING embedding_model = {{'model_name': 'other'}}")
    assert "can't update 'model_name'" in message
    assert "provider" in error(
        client, f"ALTER KNOWLEDGE_BASE {kb} USING embedding_model = {{'provider': 'ollama'}}"
    )
    assert "is not allowed" in error(client, f"ALTER KNOWLEDGE_BASE {kb} USING colour = 'red'")

    ok(
        client,
        f"ALTER KNOWLEDGE_BASE {kb} USING reranking_model = {{'provider': 'ollama', 'model_name': 'm'}}",
    )
    assert record(client, kb)["reranking_model"] == {"provider": "ollama", "model_name": "m"}  # replaced
    ok(client, f"ALTER KNOWLEDGE_BASE {kb} USING reranking_model = false")
    assert record(client, kb)["reranking_model"] is None
    ok(
        client,
        f"ALTER KNOWLEDGE_BASE {kb} USING preprocessing = {{'text_chunking_config': {{'chunk_size': 50, 'chunk_overlap': 10}}}}",
    )
    assert record(client, kb)["params"]["preprocessing"] == {
        "text_chunking_config": {"chunk_size": 50, "chunk_overlap": 10}
    }
    assert "Knowledge Base" in error(client, f"ALTER KNOWLEDGE_BASE missing_{unique} USING id_column = 'x'")


def test_alter_empty_kb_changes_embedding_model(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    kb = f"emb_{unique}"
    make_kb(client, stub, kb)
    assert record(client, kb)["params"]["vector_size"] == stub.dim
    ok(
        client,
        f"ALTER KNOWLEDGE_BASE {kb} USING embedding_model = {{'dimensions': 12, 'model_name': 'other'}}",
    )
    rec = record(client, kb)
    assert rec["embedding_model"]["model_name"] == "other" and rec["params"]["vector_size"] == 12
    ok(client, f"INSERT INTO {kb} (id, content) VALUES (1, 'twelve dimensions')")
    assert table(client, f"SELECT id FROM {kb} WHERE content = 'twelve'") == [{"id": 1}]


def test_put_with_settings_alters(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    kb = f"put_{unique}"
    make_kb(client, stub, kb)
    body = {"params": {"embedding_model": {"api_key": "e3"}, "content_columns": ["text"]}}
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": body})
    assert r.status_code == 200 and r.json() == "" and "X-Agentkb-Job" not in r.headers  # no insert job
    rec = record(client, kb)
    assert rec["content_columns"] == ["text"] and rec["embedding_model"]["model_name"] == stub.model
    stub.reset()
    rows = [{"id": 1, "text": "hello", "tag": "t"}]
    body = {"rows": rows, "params": {"metadata_columns": ["tag"], "reranking_model": False}}
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": body})
    assert r.status_code == 200, r.text
    assert stub.requests[-1].headers["authorization"] == "Bearer e3"
    assert record(client, kb)["metadata_columns"] == ["tag"]
    assert table(client, f"SELECT chunk_content, tag FROM {kb}") == [{"chunk_content": "hello", "tag": "t"}]
    bad = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"params": {"id_column": 5}}})
    assert_problem(bad, 400)


def test_put_as_mindsdb_documents_alter(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    """MindsDB's REST ALTER (docs/rest/knowledge_bases/alter.mdx): the settings beside the data, not in
    `params` (they were ignored, and the body answered 400 "Nothing to insert")."""
    kb = f"putdoc_{unique}"
    make_kb(client, stub, kb, reranking_model={**stub.chat_model("r1"), "api_key": "k1"})
    body = {
        "embedding_model": {"api_key": "e4"},
        "reranking_model": {"api_key": "******", "model_name": "r2"},  # the mask keeps the stored key
        "content_columns": ["notes"],
        "metadata_columns": ["product"],
        "id_column": "order_id",
    }
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": body})
    assert r.status_code == 200 and r.json() == "" and "X-Agentkb-Job" not in r.headers, r.text
    rec = record(client, kb)
    assert (rec["content_columns"], rec["metadata_columns"], rec["id_column"]) == (
        ["notes"],
        ["product"],
        "order_id",
    )
    assert rec["reranking_model"] == {**stub.chat_model("r2"), "api_key": "******"}
    assert (
        rec["embedding_model"]["model_name"] == stub.model and rec["embedding_model"]["api_key"] == "******"
    )
    stub.reset()
    r = client.put(
        f"{P}/knowledge_bases/{kb}",
        json={"knowledge_base": {"rows": [{"order_id": 7, "notes": "blue kettle", "product": "k"}]}},
    )
    assert r.status_code == 200, r.text
    assert {q.headers["authorization"] for q in stub.requests} == {"Bearer e4"}  # the new key embeds
    assert table(client, f"SELECT id, product FROM {kb}") == [{"id": 7, "product": "k"}]
    stub.reset()
    client.post(f"{P}/knowledge_bases/{kb}/search", json={"query": "kettle"})
    rerank = [q for q in stub.requests if q.path.endswith("/chat/completions")]
    assert rerank and {q.headers["authorization"] for q in rerank} == {"Bearer k1"}  # the kept key
    assert {q.body["model"] for q in rerank} == {"r2"}

    # reranking_model false removes it; one setting both ways, differently: 400; the same: fine
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"reranking_model": False}})
    assert r.status_code == 200 and record(client, kb)["reranking_model"] is None
    twice = {"id_column": "a", "params": {"id_column": "b"}}
    body_problem = assert_problem(
        client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": twice}), 400
    )
    assert "given twice" in body_problem["detail"]
    same = {"id_column": "a", "params": {"id_column": "a"}}
    assert client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": same}).status_code == 200
    assert record(client, kb)["id_column"] == "a"
    assert (
        "can't update 'model_name'"
        in assert_problem(
            client.put(
                f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"embedding_model": {"model_name": "x"}}}
            ),
            400,
        )["detail"]
    )
    missing = client.put(f"{P}/knowledge_bases/missing_{unique}", json={"knowledge_base": {"id_column": "x"}})
    assert_problem(missing, 404)


# --- CREATE INDEX ON KNOWLEDGE_BASE, SHOW TABLES FROM agentkb_pgvector ------------------------------------------
def index_definition(settings: Any, table_name: str) -> str:
    url = settings.database_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (f"{table_name}_hnsw",)
        ).fetchone()
    assert row is not None
    return str(row[0])


def test_create_index(client: httpx.Client, stub: OpenAIStub, settings: Any, unique: str) -> None:
    kb = f"idx_{unique}"
    make_kb(client, stub, kb)
    ok(client, f"INSERT INTO {kb} (id, content) VALUES (1, 'white paint'), (2, 'green grass')")
    storage = record(client, kb)["vector_database_table"]
    assert {"Tables_in_agentkb_pgvector": storage} in table(client, "SHOW TABLES FROM agentkb_pgvector")

    ok(client, f"CREATE INDEX ON KNOWLEDGE_BASE {kb}")  # REINDEX
    ok(
        client, f"CREATE INDEX ON KNOWLEDGE_BASE {kb} WITH (nlist = 1, type = 'ivf', train_count = 50)"
    )  # faiss's
    ok(client, f"CREATE INDEX ON KNOWLEDGE_BASE {kb} WITH (m = 8, ef_construction = 40)")
    assert "m='8'" in index_definition(settings, storage) and "ef_construction='40'" in index_definition(
        settings, storage
    )
    assert record(client, kb)["params"]["vector_index"] == {"m": 8, "ef_construction": 40}
    assert table(client, f"SELECT id FROM {kb} WHERE content = 'white paint' LIMIT 1") == [{"id": 1}]

    # a bulk load into the emptied KB builds the index again, with the same parameters
    ok(client, f"DELETE FROM {kb} WHERE id IN (1, 2)")
    ok(client, f"INSERT INTO {kb} (id, content) VALUES (3, 'blue sky')")
    assert "m='8'" in index_definition(settings, storage)

    assert "HNSW" in error(client, f"CREATE INDEX ON KNOWLEDGE_BASE {kb} WITH (type = 'ivfflat')")
    assert "not supported" in error(client, f"CREATE INDEX ON KNOWLEDGE_BASE {kb} WITH (m = 1000)")
    assert "2 × m" in error(
        client, f"CREATE INDEX ON KNOWLEDGE_BASE {kb} WITH (m = 32, ef_construction = 40)"
    )


# --- names: MindsDB lower-cases unquoted names; back-quoted ones keep their case --------------------------------
def test_name_case_rules(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    kb = f"MixedKB_{unique}"
    make_kb(client, stub, f"`{kb}`")
    assert record(client, kb)["name"] == kb  # REST: the exact name
    assert "does not exist" in error(client, f"SELECT * FROM {kb}")  # unquoted: lower-cased
    assert table(client, f"SELECT * FROM `{kb}`") == []
    ok(client, f"DROP KNOWLEDGE_BASE `{kb}`")

    project = f"Proj_{unique}"
    ok(client, f"CREATE DATABASE `{project}`")
    assert client.get(f"/api/projects/{project.lower()}").json() == {"name": project}  # any case over REST
    assert "already exists" in error(client, f"CREATE DATABASE {project}")  # one name in any case
    assert (
        table(client, f"SELECT NAME FROM information_schema.databases WHERE NAME = '{project.lower()}'") == []
    )
    assert "does not exist" in error(client, f"DROP DATABASE {project}")  # lower-cased, matched exactly
    ok(
        client,
        f"CREATE KNOWLEDGE_BASE {project}.kb USING embedding_model = {json.dumps(stub.embedding_model())}",
    )
    ok(client, f"CREATE AGENT {project}.ag USING data = {{'knowledge_bases': ['kb']}}")

    assert "lower case" in error(client, f"ALTER DATABASE `{project}` NAME = 'Renamed_{unique}'")
    ok(client, f"ALTER DATABASE {project} NAME = 'renamed_{unique}'")
    assert client.get(f"/api/projects/renamed_{unique}/agents/ag").json()["data"]["knowledge_bases"] == [
        f"renamed_{unique}.kb"
    ]
    assert "mindsdb cannot be renamed" in error(client, "ALTER DATABASE mindsdb NAME = 'other'")
    assert "does not exist" in error(client, f"ALTER DATABASE missing_{unique} NAME = 'x'")

    ok(client, f"UPDATE AGENT renamed_{unique}.ag SET prompt_template = 'be brief', mode = 'text'")
    agent = client.get(f"/api/projects/renamed_{unique}/agents/ag").json()
    assert agent["prompt_template"] == "be brief" and agent["params"]["mode"] == "text"
    assert "does not exist" in error(client, f"UPDATE AGENT renamed_{unique}.`AG` SET mode = 'x'")
    ok(client, f"DROP AGENT renamed_{unique}.ag")
    ok(client, f"DROP KNOWLEDGE_BASE renamed_{unique}.kb")
    ok(client, f"DROP DATABASE renamed_{unique}")
