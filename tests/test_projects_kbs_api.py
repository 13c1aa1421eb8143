"""Project and knowledge-base resource endpoints (spec 2.2, 4.6) over real HTTP and real Postgres."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import psycopg

from tests.helpers import TIMESTAMP, assert_problem

KB_KEYS = {
    "id",
    "name",
    "project_id",
    "project_name",
    "vector_database",
    "vector_database_table",
    "updated_at",
    "created_at",
    "query_id",
    "embedding_model",
    "reranking_model",
    "metadata_columns",
    "content_columns",
    "id_column",
    "params",
}


def test_projects_list_create_delete(client: httpx.Client, unique: str) -> None:
    assert {"name": "mindsdb"} in client.get("/api/projects").json()
    name = f"proj_{unique}"
    r = client.post("/api/projects", json={"name": name})
    assert r.status_code == 201 and r.json() == {"name": name}
    assert {"name": name} in client.get("/api/projects").json()
    assert client.get(f"/api/projects/{name.upper()}").json() == {"name": name}  # case-insensitive
    assert_problem(client.post("/api/projects", json={"name": name}), 409)
    assert client.post(f"/api/projects/{name}/agents", json={"agent": {"name": "a"}}).status_code == 201
    assert_problem(client.delete(f"/api/projects/{name}"), 409)  # not empty
    assert client.delete(f"/api/projects/{name}/agents/a").status_code == 204
    assert client.delete(f"/api/projects/{name}").status_code == 204
    assert_problem(client.get(f"/api/projects/{name}"), 404)
    assert_problem(client.delete("/api/projects/mindsdb"), 400)
    assert_problem(client.post("/api/projects", json={"name": "bad name"}), 400)


def test_kb_create_list_get_masks_keys(client: httpx.Client, unique: str) -> None:
    name = f"kb_{unique}"
    body = {
        "knowledge_base": {
            "name": name,
            "embedding_model": {
                "provider": "openai",
                "model_name": "text-embedding-3-small",
                "api_key": "sk-secret",
            },
            "metadata_columns": ["author"],
            "content_columns": ["body"],
            "id_column": "doc_id",
        }
    }
    r = client.post("/api/projects/mindsdb/knowledge_bases", json=body)
    assert r.status_code == 201, r.text
    record = r.json()
    assert set(record) == KB_KEYS
    assert record["embedding_model"]["api_key"] == "******"
    assert "sk-secret" not in r.text
    assert record["vector_database"] == "agentkb_pgvector"
    assert re.match(r"^kb_chunks_\d+$", record["vector_database_table"])
    assert record["params"]["created_embedding_model"] == "text-embedding-3-small"
    assert record["params"]["default_vector_storage"] == "agentkb_pgvector"
    assert record["metadata_columns"] == ["author"] and record["content_columns"] == ["body"]
    assert (
        record["id_column"] == "doc_id" and record["query_id"] is None and record["reranking_model"] is None
    )
    assert TIMESTAMP.match(record["created_at"]) and TIMESTAMP.match(record["updated_at"])
    assert record in client.get("/api/projects/mindsdb/knowledge_bases").json()
    one = client.get(f"/api/projects/mindsdb/knowledge_bases/{name}").json()
    assert (one.pop("document_count"), one.pop("chunk_count")) == (0, 0)  # GET one adds counts
    assert one == record
    assert_problem(client.post("/api/projects/mindsdb/knowledge_bases", json=body), 409)


def test_kb_default_embedder_and_nulls(client: httpx.Client, unique: str) -> None:
    r = client.post(
        "/api/projects/mindsdb/knowledge_bases", json={"knowledge_base": {"name": f"kb_{unique}"}}
    )
    assert r.status_code == 201, r.text
    record = r.json()
    assert record["embedding_model"] == {"provider": "local", "model_name": "all-MiniLM-L6-v2"}
    assert record["params"]["vector_size"] == 384
    for key in ("metadata_columns", "content_columns", "id_column", "reranking_model"):
        assert record[key] is None


def _indexes(pg_url: str, table: str) -> dict[str, str]:
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", (table,)
        ).fetchall()
    return {name: definition for name, definition in rows}


def _kb_with_two_rows(client: httpx.Client, kbs: str, name: str) -> tuple[str, list[dict[str, Any]]]:
    """Creates the knowledge base `name` under `kbs` holding two rows; its chunk table and the rows."""
    table = client.post(kbs, json={"knowledge_base": {"name": name}}).json()["vector_database_table"]
    rows = [{"id": 1, "content": "the fuser unit overheated"}, {"id": 2, "content": "paper jam at the rear"}]
    assert client.put(f"{kbs}/{name}", json={"knowledge_base": {"rows": rows}}).status_code == 200
    return str(table), rows


def test_migration_drops_the_full_text_column(client: httpx.Client, unique: str, pg_url: str) -> None:
    """Chunk tables made before 0013 had a generated `tsv` column and its GIN index: upgrading drops both
    and keeps the rows (searched as before)."""
    from agentkb.storage.migrate import upgrade

    name = f"kb_{unique}"
    kbs = "/api/projects/mindsdb/knowledge_bases"
    table, rows = _kb_with_two_rows(client, kbs, name)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (head,) = conn.execute("SELECT version_num FROM alembic_version").fetchone() or ("",)
        conn.execute(
            f"ALTER TABLE {table} ADD COLUMN tsv tsvector "
            "GENERATED ALWAYS AS (to_tsvector('english', content)) STORED"
        )
        conn.execute(f"CREATE INDEX {table}_tsv ON {table} USING gin (tsv)")
        conn.execute("UPDATE alembic_version SET version_num = '0012_file_blobs'")
    upgrade(pg_url)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (head,)
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s", (table,)
        ).fetchall()
    assert "tsv" not in {c for (c,) in columns}
    assert not any("tsv" in d for d in _indexes(pg_url, table).values())
    found = client.post(f"{kbs}/{name}/search", json={"query": "fuser overheated", "limit": 1}).json()
    assert [h["id"] for h in found] == [1], found
    assert client.delete(f"{kbs}/{name}").status_code == 204


def test_migration_adds_document_fingerprints(client: httpx.Client, unique: str, pg_url: str) -> None:
    """Chunk tables made before 0014 have no `doc_fingerprint`: upgrading adds it, and their chunks (without
    one) are found unchanged by an insert of the same rows, and rewritten when they change."""
    from agentkb.storage.migrate import upgrade

    name = f"kb_{unique}"
    kbs = "/api/projects/mindsdb/knowledge_bases"
    table, rows = _kb_with_two_rows(client, kbs, name)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (head,) = conn.execute("SELECT version_num FROM alembic_version").fetchone() or ("",)
        conn.execute(f"ALTER TABLE {table} DROP COLUMN doc_fingerprint")
        conn.execute("UPDATE alembic_version SET version_num = '0013_no_fulltext_column'")
    upgrade(pg_url)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (head,)
        assert conn.execute(f"SELECT count(*) FROM {table} WHERE doc_fingerprint IS NULL").fetchone() == (2,)
    again = client.put(f"{kbs}/{name}", json={"knowledge_base": {"rows": rows}}).headers["x-agentkb-ingest"]
    assert "unchanged=2" in again and "written=0" in again
    changed = [rows[0], {"id": 2, "content": "paper jam at the front"}]
    again = client.put(f"{kbs}/{name}", json={"knowledge_base": {"rows": changed}}).headers[
        "x-agentkb-ingest"
    ]
    assert "unchanged=1" in again and "written=1" in again
    assert client.delete(f"{kbs}/{name}").status_code == 204


def test_migration_keeps_chunk_rows_whole(client: httpx.Client, unique: str, pg_url: str) -> None:
    """Chunk tables made before 0015 have PostgreSQL's default TOAST threshold: upgrading gives them
    `storage.chunks.ROW_TOAST_TARGET`, and their rows stay searchable."""
    from agentkb.storage.chunks import ROW_TOAST_TARGET
    from agentkb.storage.migrate import upgrade

    name = f"kb_{unique}"
    kbs = "/api/projects/mindsdb/knowledge_bases"
    table, rows = _kb_with_two_rows(client, kbs, name)
    options = "SELECT reloptions FROM pg_class WHERE oid = %s::regclass"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (head,) = conn.execute("SELECT version_num FROM alembic_version").fetchone() or ("",)
        conn.execute(f"ALTER TABLE {table} RESET (toast_tuple_target)")
        assert conn.execute(options, (table,)).fetchone() == (None,)
        conn.execute("UPDATE alembic_version SET version_num = '0014_document_fingerprints'")
    upgrade(pg_url)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (head,)
        assert conn.execute(options, (table,)).fetchone() == ([f"toast_tuple_target={ROW_TOAST_TARGET}"],)
    found = client.post(f"{kbs}/{name}/search", json={"query": "fuser overheated", "limit": 1}).json()
    assert [h["id"] for h in found] == [1], found
    assert client.delete(f"{kbs}/{name}").status_code == 204


def test_migration_drops_the_metadata_index(client: httpx.Client, unique: str, pg_url: str) -> None:
    """Chunk tables made before 0016 had a GIN index on `metadata` that no filter could use: upgrading drops it;
    a new table has none; filters work as before."""
    from agentkb.storage.migrate import upgrade

    name = f"kb_{unique}"
    kbs = "/api/projects/mindsdb/knowledge_bases"
    table = client.post(kbs, json={"knowledge_base": {"name": name, "metadata_columns": ["kind"]}}).json()[
        "vector_database_table"
    ]
    assert not any("metadata" in d for d in _indexes(pg_url, table).values())
    rows = [
        {"id": 1, "content": "the fuser unit overheated", "kind": "hardware"},
        {"id": 2, "content": "the fuser was replaced", "kind": "repair"},
    ]
    assert client.put(f"{kbs}/{name}", json={"knowledge_base": {"rows": rows}}).status_code == 200
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (head,) = conn.execute("SELECT version_num FROM alembic_version").fetchone() or ("",)
        conn.execute(f"CREATE INDEX {table}_meta ON {table} USING gin (metadata jsonb_path_ops)")
        conn.execute("UPDATE alembic_version SET version_num = '0015_chunk_rows_whole'")
    assert f"{table}_meta" in _indexes(pg_url, table)
    upgrade(pg_url)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (head,)
    assert f"{table}_meta" not in _indexes(pg_url, table)
    found = client.post(
        f"{kbs}/{name}/search",
        json={"query": "fuser", "filters": {"kind": "repair"}, "limit": 5},
    ).json()
    assert [h["id"] for h in found] == [2], found
    assert client.delete(f"{kbs}/{name}").status_code == 204


def test_an_insert_that_changes_nothing_keeps_the_knowledge_base_version(
    client: httpx.Client, unique: str, pg_url: str
) -> None:
    """The KB's `updated_at` versions its search caches (its BM25 index through `content_version`, which
    moves with it on writes of chunks): an insert that writes and deletes nothing keeps it, so they stay
    warm; one that changes a row moves it."""
    name = f"kb_{unique}"
    kbs = "/api/projects/mindsdb/knowledge_bases"
    assert client.post(kbs, json={"knowledge_base": {"name": name}}).status_code == 201
    rows = [{"id": 1, "content": "the fuser unit overheated"}, {"id": 2, "content": "paper jam at the rear"}]

    def version() -> Any:
        with psycopg.connect(pg_url) as conn:
            row = conn.execute("SELECT updated_at FROM knowledge_bases WHERE name = %s", (name,)).fetchone()
        assert row is not None
        return row[0]

    assert client.put(f"{kbs}/{name}", json={"knowledge_base": {"rows": rows}}).status_code == 200
    written = version()
    again = client.put(f"{kbs}/{name}", json={"knowledge_base": {"rows": rows}}).headers["x-agentkb-ingest"]
    assert "unchanged=2" in again and version() == written
    changed = [rows[0], {"id": 2, "content": "paper jam at the front"}]
    assert client.put(f"{kbs}/{name}", json={"knowledge_base": {"rows": changed}}).status_code == 200
    assert version() > written
    assert client.delete(f"{kbs}/{name}").status_code == 204


def test_kb_storage_created_and_dropped(client: httpx.Client, unique: str, pg_url: str) -> None:
    name = f"kb_{unique}"
    table = client.post(
        "/api/projects/mindsdb/knowledge_bases", json={"knowledge_base": {"name": name}}
    ).json()["vector_database_table"]
    indexes = _indexes(pg_url, table)
    assert any("hnsw" in d and "vector_cosine_ops" in d for d in indexes.values()), indexes
    assert not any("tsv" in d for d in indexes.values()), indexes  # no full-text column (BM25 ranks)
    with psycopg.connect(pg_url) as conn:
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s", (table,)
        ).fetchall()
    assert {c for (c,) in columns} == {
        "chunk_id",
        "doc_id",
        "content",
        "content_hash",
        "metadata",
        "embedding",
        "updated_at",
        "seq",
        "doc_fingerprint",
    }
    assert client.delete(f"/api/projects/mindsdb/knowledge_bases/{name}").status_code == 204
    assert _indexes(pg_url, table) == {}
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() == (None,)
    assert_problem(client.get(f"/api/projects/mindsdb/knowledge_bases/{name}"), 404)
    assert_problem(client.delete(f"/api/projects/mindsdb/knowledge_bases/{name}"), 404)


def test_kb_bad_input(client: httpx.Client, unique: str) -> None:
    url = "/api/projects/mindsdb/knowledge_bases"
    cases: list[tuple[object, str]] = [
        ({}, "knowledge_base"),
        ({"knowledge_base": {}}, "name"),
        ({"knowledge_base": {"name": "bad-name"}}, "name"),
        (
            {
                "knowledge_base": {
                    "name": f"k_{unique}",
                    "embedding_model": {"provider": "nope", "model_name": "m"},
                }
            },
            "provider",
        ),
        ({"knowledge_base": {"name": f"k_{unique}", "metadata_columns": "author"}}, "metadata_columns"),
    ]
    for body, field in cases:
        problem = assert_problem(client.post(url, json=body), 400)
        assert field in problem["detail"], (body, problem)
    assert_problem(
        client.post("/api/projects/nope/knowledge_bases", json={"knowledge_base": {"name": "k"}}), 404
    )
    # An unknown model's vector size is asked of the provider; an unreachable one is a 502 naming it.
    unreachable = {"provider": "openai", "model_name": "custom-model", "base_url": "http://127.0.0.1:9/v1"}
    problem = assert_problem(
        client.post(url, json={"knowledge_base": {"name": f"k_{unique}", "embedding_model": unreachable}}),
        502,
    )
    assert "custom-model" in problem["detail"] and "127.0.0.1:9" in problem["detail"]
    assert_problem(client.get(f"{url}/k_{unique}"), 404)  # nothing half-created
    assert_problem(client.get("/api/projects/nope/knowledge_bases"), 404)


def test_concurrent_kb_creates_of_one_name(base_url: str, unique: str, pg_url: str) -> None:
    body = {"knowledge_base": {"name": f"race_{unique}"}}

    async def run() -> list[int]:
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as c:
            responses = await asyncio.gather(
                *(c.post("/api/projects/mindsdb/knowledge_bases", json=body) for _ in range(8))
            )
        return sorted(r.status_code for r in responses)

    assert asyncio.run(run()) == [201] + [409] * 7
    with psycopg.connect(pg_url) as conn:
        count = conn.execute(
            "SELECT count(*) FROM knowledge_bases WHERE name = %s", (f"race_{unique}",)
        ).fetchone()
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables t LEFT JOIN knowledge_bases k ON k.storage_table = t.tablename "
            "WHERE t.tablename LIKE 'kb_chunks_%%' AND k.id IS NULL"
        ).fetchone()
    assert count == (1,)
    assert tables == (0,)  # losers' chunk tables rolled back with their records


def test_status_and_health(client: httpx.Client) -> None:
    status = client.get("/api/status").json()
    assert set(status) >= {"mindsdb_version", "environment", "auth"}
    assert status["environment"] == "local"
    assert status["auth"]["http_auth_enabled"] is False
    assert client.get("/health").json() == {"status": "ok"}
    assert client.get("/openapi.json").json()["info"]["title"] == "agentkb"


def bm25_builds(client: httpx.Client) -> float:
    found = re.search(r"^agentkb_bm25_index_builds_total (\S+)$", client.get("/metrics").text, re.M)
    assert found, "the BM25 builds counter is exported"
    return float(found.group(1))


def test_a_settings_change_keeps_the_bm25_index_and_a_write_rebuilds_it(
    client: httpx.Client, unique: str, pg_url: str
) -> None:
    """BM25 indexes are keyed by the KB's `content_version`: changing a setting (ef_search, as the 1M
    benchmark does, or a reranker) moves `updated_at` but not it, so the next hybrid search reuses the index;
    a write of chunks moves both, and the next hybrid search builds a new one."""
    name = f"kb_{unique}"
    kbs = "/api/projects/mindsdb/knowledge_bases"
    assert client.post(kbs, json={"knowledge_base": {"name": name}}).status_code == 201
    rows = [{"id": 1, "content": "the fuser unit overheated"}, {"id": 2, "content": "paper jam at the rear"}]
    assert client.put(f"{kbs}/{name}", json={"knowledge_base": {"rows": rows}}).status_code == 200

    def versions() -> tuple[Any, Any]:
        with psycopg.connect(pg_url) as conn:
            row = conn.execute(
                "SELECT updated_at, content_version FROM knowledge_bases WHERE name = %s", (name,)
            ).fetchone()
        assert row is not None
        return row[0], row[1]

    def search() -> list[Any]:
        found = client.post(f"{kbs}/{name}/search", json={"query": "fuser", "limit": 2})
        assert found.status_code == 200, found.text
        return [h["id"] for h in found.json()]

    assert search()[0] == 1
    built = bm25_builds(client)
    before = versions()
    altered = client.put(f"{kbs}/{name}", json={"knowledge_base": {"params": {"ef_search": 77}}})
    assert altered.status_code == 200, altered.text
    after = versions()
    assert after[0] > before[0] and after[1] == before[1]  # the row moved, its chunks did not
    assert search()[0] == 1
    assert bm25_builds(client) == built  # the index outlived the settings change
    changed = [{"id": 3, "content": "a fuser for the rear tray"}]
    assert client.put(f"{kbs}/{name}", json={"knowledge_base": {"rows": changed}}).status_code == 200
    assert versions()[1] > after[1]
    assert sorted(search()) == [1, 3]
    assert bm25_builds(client) == built + 1
    assert client.delete(f"{kbs}/{name}").status_code == 204


def test_listings_find_the_project_in_one_query(client: httpx.Client, unique: str, pg_url: str) -> None:
    """`GET …/agents` and `GET …/knowledge_bases` look the project up in the listing's own query: empty
    projects list `[]`, unknown ones 404, the name matches case-insensitively with its exact spelling first,
    and the rows come in creation order."""
    name = f"lists_{unique}"
    assert client.post("/api/projects", json={"name": name}).status_code == 201
    for kind in ("agents", "knowledge_bases"):
        assert client.get(f"/api/projects/{name}/{kind}").json() == []
        assert client.get(f"/api/projects/{name.upper()}/{kind}").json() == []
        assert_problem(client.get(f"/api/projects/{name}_none/{kind}"), 404)
        assert_problem(client.get(f"/api/projects/bad%20name/{kind}"), 404)
    for agent in ("zeta", "alpha"):
        assert client.post(f"/api/projects/{name}/agents", json={"agent": {"name": agent}}).status_code == 201
    for kb in ("kb_zeta", "kb_alpha"):
        model = {"provider": "openai", "model_name": "text-embedding-3-small", "api_key": "sk-x"}
        body = {"knowledge_base": {"name": kb, "embedding_model": model}}
        assert client.post(f"/api/projects/{name}/knowledge_bases", json=body).status_code == 201
    assert [a["name"] for a in client.get(f"/api/projects/{name.upper()}/agents").json()] == ["zeta", "alpha"]
    listed = client.get(f"/api/projects/{name.upper()}/knowledge_bases").json()
    assert [k["name"] for k in listed] == ["kb_zeta", "kb_alpha"]
    assert {k["project_name"] for k in listed} == {name}
    assert listed[0]["embedding_model"]["api_key"] == "******"
    # one of them by name, as the agent runs and searches look them up: any spelling of the project
    agent = client.get(f"/api/projects/{name.upper()}/agents/alpha").json()
    assert (agent["name"], agent["data"]) == ("alpha", {"knowledge_bases": [], "tables": []})
    kb = client.get(f"/api/projects/{name.upper()}/knowledge_bases/kb_alpha").json()
    assert (kb["name"], kb["project_name"], kb["embedding_model"]["api_key"]) == ("kb_alpha", name, "******")
    assert_problem(client.get(f"/api/projects/{name}/agents/omega"), 404)
    assert_problem(client.get(f"/api/projects/{name}/knowledge_bases/kb_omega"), 404)
    assert_problem(client.get(f"/api/projects/{name}_none/agents/alpha"), 404)
    # a second project spelt with other cases (the API refuses one, the database holds it): each spelling
    # lists and finds its own rows, another spelling the first project's; a look-up by name agrees with the
    # listing (the twin holds no agent or KB, so none is found through it)
    twin = name.upper()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO projects (name) VALUES (%s)", (twin,))
    try:
        assert client.get(f"/api/projects/{twin}/agents").json() == []
        assert client.get(f"/api/projects/{twin}/knowledge_bases").json() == []
        assert_problem(client.get(f"/api/projects/{twin}/agents/alpha"), 404)
        assert_problem(client.get(f"/api/projects/{twin}/knowledge_bases/kb_alpha"), 404)
        search = {"query": "anything", "limit": 1}
        assert_problem(client.post(f"/api/projects/{twin}/knowledge_bases/kb_alpha/search", json=search), 404)
        assert len(client.get(f"/api/projects/{name}/agents").json()) == 2
        assert client.get(f"/api/projects/{name}/agents/alpha").json()["name"] == "alpha"
        mixed = name[0].upper() + name[1:]
        assert len(client.get(f"/api/projects/{mixed}/knowledge_bases").json()) == 2
        assert client.get(f"/api/projects/{mixed}/knowledge_bases/kb_alpha").json()["project_name"] == name
        assert client.get(f"/api/projects/{mixed}/agents/alpha").json()["name"] == "alpha"
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DELETE FROM projects WHERE name = %s", (twin,))
