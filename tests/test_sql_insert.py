"""Loading knowledge bases through SQL as MindsDB's tutorials do: `INSERT INTO <kb> SELECT ... FROM files.<name>`,
the `USING` options (kb_skip_existing, kb_no_upsert, batch_size / track_column as a background query),
`information_schema.queries`, `query_cancel` / `query_resume`, `DROP TABLE files.<name>`, `USE files`; and the
create-time defaults (`default_reranking_model`, models and columns under `params`)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests import externals
from tests.conftest import ServedApp
from tests.helpers import sql, stub_kb
from tests.helpers import sql_error as error
from tests.helpers import sql_ok as ok
from tests.helpers import sql_rows as table
from tests.openai_stub import OpenAIStub, stub_vector

P = "/api/projects/mindsdb"
RERANKER = {
    "provider": "openai",
    "model_name": "rr-model",
    "api_key": "rr-key",
    "base_url": "http://127.0.0.1:9/v1",
}


def upload_csv(client: httpx.Client, name: str, rows: list[tuple[Any, ...]], header: str) -> None:
    body = "\n".join([header, *(",".join(str(v) for v in row) for row in rows)]) + "\n"
    r = client.put(f"/api/files/{name}", files={"file": (f"{name}.csv", body.encode())})
    assert r.status_code == 200, r.text


def wait_query(client: httpx.Client, query_id: int) -> dict[str, Any]:
    for _ in range(300):
        rows = table(client, f"SELECT * FROM information_schema.queries WHERE id = {query_id}")
        assert len(rows) == 1, rows
        if rows[0]["ERROR"] is not None or rows[0]["FINISHED_AT"] is not None:
            return rows[0]
        time.sleep(0.1)
    raise AssertionError(f"query {query_id} did not finish")


@pytest.fixture(scope="module")
def custom_app(pg_url: str) -> Any:
    """`with custom_app(**settings) as client:` an agentkb of its own, on its own database."""

    @contextlib.contextmanager
    def start(**overrides: Any) -> Iterator[httpx.Client]:
        from agentkb.settings import Settings

        name = f"sqlins_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        url = make_url(pg_url).set(database=name).render_as_string(hide_password=False)
        data_dir = Path(tempfile.mkdtemp(prefix="agentkb-sqlins-"))
        settings = Settings(database_url=url, data_dir=data_dir, job_heartbeat_s=0.5, **overrides)
        try:
            with ServedApp(settings) as app, httpx.Client(base_url=app.url, timeout=120) as client:
                yield client
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)
            with contextlib.suppress(psycopg.Error), psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    return start


# --- inserting from uploaded files --------------------------------------------------------------------------


def test_insert_from_files_use_files_and_drop_table(client: httpx.Client, unique: str) -> None:
    kb, file = f"fkb_{unique}", f"notes_{unique}"
    upload_csv(client, file, [(1, "whales sing", "sea"), (2, "glaciers carve", "ice")], "num,body,topic")
    ok(
        client,
        f"CREATE KNOWLEDGE_BASE {kb} USING content_columns = ['content'], metadata_columns = ['topic']",
    )
    # the tutorials' shape: columns renamed to id / content in the SELECT
    answer = ok(client, f"INSERT INTO {kb} SELECT num AS id, body AS content, topic FROM files.{file}")
    assert answer["affected_rows"] == 2
    rows = table(client, f"SELECT id, chunk_content, metadata FROM {kb}")
    assert sorted((r["id"], r["chunk_content"]) for r in rows) == [(1, "whales sing"), (2, "glaciers carve")]
    assert {r["metadata"]["topic"] for r in rows} == {"sea", "ice"}

    # USE files: the files database is the context; its tables are read bare
    used = ok(client, "USE files")
    assert used["context"]["db"] == "files"
    assert [r["num"] for r in table(client, f"SELECT num FROM {file} ORDER BY num", db="files")] == [1, 2]
    assert {"Tables_in_files": file} in table(client, "SHOW TABLES", db="files")
    assert "Database nope_db does not exists" in error(client, "USE nope_db")

    # the same file, by the REST insert's query
    r = client.put(
        f"{P}/knowledge_bases/{kb}",
        json={
            "knowledge_base": {"query": f"SELECT num AS id, body AS content FROM files.{file} WHERE num = 1"}
        },
    )
    assert r.status_code == 200, r.text

    ok(client, f"DROP TABLE files.{file}")
    assert file not in [f["name"] for f in client.get("/api/files/").json()]
    assert f"File '{file}' does not exists" in error(client, f"DROP TABLE files.{file}")
    ok(client, f"DROP TABLE IF EXISTS files.{file}")
    assert "DROP KNOWLEDGE_BASE" in error(client, f"DROP TABLE mindsdb.{kb}")
    assert "does not exist" in error(client, f"INSERT INTO {kb} SELECT * FROM files.{file}")
    ok(client, f"DROP KNOWLEDGE_BASE {kb}")


def test_skip_existing_and_no_upsert(client: httpx.Client, unique: str) -> None:
    kb, first, second = f"skip_{unique}", f"first_{unique}", f"second_{unique}"
    upload_csv(client, first, [(1, "green apple"), (2, "red cherry")], "id,content")
    upload_csv(client, second, [(1, "yellow banana"), (3, "blue plum")], "id,content")
    ok(client, f"CREATE KNOWLEDGE_BASE {kb}")
    ok(client, f"INSERT INTO {kb} SELECT * FROM files.{first} USING kb_no_upsert = true")
    ok(client, f"INSERT INTO {kb} SELECT * FROM files.{second} USING kb_skip_existing = true")
    rows = {r["id"]: r["chunk_content"] for r in table(client, f"SELECT id, chunk_content FROM {kb}")}
    assert rows == {1: "green apple", 2: "red cherry", 3: "blue plum"}
    jobs = client.get(f"{P}/knowledge_bases/{kb}/jobs").json()
    assert jobs[0]["counts"]["skipped_existing"] == 1 and jobs[0]["counts"]["embedded"] == 1, jobs[0]
    # without the option the id is replaced
    ok(client, f"INSERT INTO {kb} SELECT * FROM files.{second}")
    assert table(client, f"SELECT chunk_content FROM {kb} WHERE id = 1") == [
        {"chunk_content": "yellow banana"}
    ]

    assert "Unknown insert option(s) kb_nope" in error(
        client, f"INSERT INTO {kb} SELECT * FROM files.{first} USING kb_nope = true"
    )
    assert "give batch_size too" in error(
        client, f"INSERT INTO {kb} SELECT * FROM files.{first} USING track_column = id"
    )
    assert "true or false" in error(
        client, f"INSERT INTO {kb} SELECT * FROM files.{first} USING kb_no_upsert = 'x'"
    )
    ok(client, f"DROP KNOWLEDGE_BASE {kb}")


# --- partitioned inserts as MindsDB's queries ---------------------------------------------------------------


def test_partitioned_insert_is_a_query(client: httpx.Client, unique: str) -> None:
    kb, file = f"part_{unique}", f"many_{unique}"
    upload_csv(client, file, [(i, f"passage number {i}") for i in range(1, 26)], "id,content")
    ok(client, f"CREATE KNOWLEDGE_BASE {kb}")
    record = table(
        client, f"INSERT INTO {kb} SELECT * FROM files.{file} USING batch_size = 10, track_column = ID"
    )
    assert len(record) == 1 and list(record[0])[:3] == ["ID", "SQL", "DATABASE"]
    assert record[0]["STARTED_AT"] is None and record[0]["PROCESSED_ROWS"] == 0
    query_id = record[0]["ID"]
    assert isinstance(query_id, int)

    done = wait_query(client, query_id)
    assert done["ERROR"] is None and done["PROCESSED_ROWS"] == 25
    assert kb in done["SQL"] and done["DATABASE"] == "mindsdb"
    assert done["PARAMETERS"] == {"batch_size": 10, "track_column": "ID"}
    assert done["CONTEXT"]["track_value"] == 25
    assert len(table(client, f"SELECT id FROM {kb}")) == 25
    job = client.get(f"{P}/knowledge_bases/{kb}/jobs").json()[0]
    assert job["state"] == "succeeded" and job["counts"]["documents"] == 25

    # query_cancel takes it off the list (the job stays, finished)
    assert sql(client, f"SELECT query_cancel({query_id})")["type"] == "ok"
    assert table(client, f"SELECT * FROM information_schema.queries WHERE id = {query_id}") == []
    assert f"Query not found: {query_id}" in error(client, f"SELECT query_cancel({query_id})")
    assert client.get(f"{P}/knowledge_bases/{kb}/jobs/{job['id']}").json()["state"] == "succeeded"

    # a failing partitioned insert: ERROR set, FINISHED_AT not; query_resume queues it again
    record = table(
        client, f"INSERT INTO {kb} SELECT * FROM files.{file} USING batch_size = 10, track_column = nope"
    )
    failed = wait_query(client, record[0]["ID"])
    assert "Column 'nope' not found" in failed["ERROR"] and failed["FINISHED_AT"] is None
    resumed = table(client, f"SELECT query_resume({record[0]['ID']})")
    assert resumed[0]["ID"] == record[0]["ID"] and resumed[0]["ERROR"] is None
    assert "Column 'nope' not found" in wait_query(client, record[0]["ID"])["ERROR"]
    assert "Query not found" in error(client, f"SELECT query_resume({query_id})")  # cancelled above
    ok(client, f"DROP KNOWLEDGE_BASE {kb}")
    assert table(client, f"SELECT * FROM information_schema.queries WHERE id = {record[0]['ID']}") == []


def test_partitions_from_a_data_source(client: httpx.Client, unique: str, pg_source: dict[str, Any]) -> None:
    ok(client, f"CREATE DATABASE pgp_{unique} WITH ENGINE = 'postgres', PARAMETERS = {pg_source!r}")
    with externals.connect("postgres", pg_source) as conn:
        conn.execute(f"CREATE TABLE docs_{unique} (id int, body text)")
        conn.execute(f"INSERT INTO docs_{unique} SELECT i, 'row ' || i FROM generate_series(1, 23) AS i")
    kb = f"pgpart_{unique}"
    ok(client, f"CREATE KNOWLEDGE_BASE {kb} USING content_columns = ['body']")
    record = table(
        client,
        f"INSERT INTO {kb} SELECT id, body FROM pgp_{unique}.docs_{unique} WHERE id > 3 "
        "USING batch_size = 5, track_column = id, threads = 2",
    )
    done = wait_query(client, record[0]["ID"])
    assert done["ERROR"] is None and done["PROCESSED_ROWS"] == 20 and done["CONTEXT"]["track_value"] == 23
    assert len(table(client, f"SELECT id FROM {kb}")) == 20
    ok(client, f"DROP KNOWLEDGE_BASE {kb}")
    ok(client, f"DROP DATABASE pgp_{unique}")


# --- settings: autobatch, default reranking model; MindsDB's spellings of a create body ------------------------


def test_autobatch_and_default_reranking_model(custom_app: Any) -> None:
    with custom_app(autobatch_inserts=True, default_reranking_model=RERANKER) as client:
        upload_csv(client, "ral", [(1000, "Green beige"), (1004, "Golden yellow")], "ral,english")
        ok(client, "CREATE KNOWLEDGE_BASE kb_auto USING id_column = 'ral', content_columns = ['english']")
        record = table(client, "INSERT INTO kb_auto SELECT * FROM files.ral")  # has the id column: background
        assert wait_query(client, record[0]["ID"])["PARAMETERS"] == {
            "batch_size": 1000,
            "track_column": "ral",
        }
        assert {r["id"] for r in table(client, "SELECT id FROM kb_auto")} == {1000, 1004}
        ok(client, "CREATE KNOWLEDGE_BASE kb_sync USING content_columns = ['english']")
        assert (
            ok(client, "INSERT INTO kb_sync SELECT * FROM files.ral")["affected_rows"] == 2
        )  # no `id`: sync
        # a sync INSERT ... SELECT is a query too (finished)
        assert len(table(client, "SELECT * FROM information_schema.queries")) == 2

        def reranker(name: str) -> Any:
            return client.get(f"{P}/knowledge_bases/{name}").json()["reranking_model"]

        assert reranker("kb_auto") == {**RERANKER, "api_key": "******"}
        ok(client, "CREATE KNOWLEDGE_BASE kb_off USING reranking_model = false")
        assert reranker("kb_off") is None
        ok(client, "CREATE KNOWLEDGE_BASE kb_merged USING reranking_model = {'model_name': 'other'}")
        assert reranker("kb_merged") == {**RERANKER, "model_name": "other", "api_key": "******"}
        ok(
            client,
            "CREATE KNOWLEDGE_BASE kb_other USING reranking_model = {'provider': 'ollama', 'model_name': 'm'}",
        )
        assert reranker("kb_other") == {"provider": "ollama", "model_name": "m"}


def test_create_body_settings_under_params(client: httpx.Client, unique: str) -> None:
    """MindsDB's POST copies the top-level model/column keys into `params` and its controller reads them from
    there, so either place works (the top level wins)."""
    r = client.post(
        f"{P}/knowledge_bases",
        json={
            "knowledge_base": {
                "name": f"pkb_{unique}",
                "id_column": "top",
                "params": {
                    "embedding_model": {
                        "provider": "local",
                        "model_name": "all-MiniLM-L6-v2",
                        "dimensions": 384,
                    },
                    "reranking_model": {"provider": "openai", "model_name": "rr", "api_key": "secret"},
                    "content_columns": ["body"],
                    "metadata_columns": ["topic"],
                    "id_column": "under_params",
                    "chunk_size": 500,
                },
            }
        },
    )
    assert r.status_code == 201, r.text
    kb = r.json()
    assert kb["embedding_model"]["dimensions"] == 384
    assert kb["reranking_model"] == {"provider": "openai", "model_name": "rr", "api_key": "******"}
    assert (kb["content_columns"], kb["metadata_columns"], kb["id_column"]) == (["body"], ["topic"], "top")
    assert kb["params"]["chunk_size"] == 500 and "embedding_model" not in kb["params"]
    assert client.delete(f"{P}/knowledge_bases/pkb_{unique}").status_code == 204


def test_partitioned_insert_resumes_after_its_last_batch(client: httpx.Client, unique: str) -> None:
    """A batch that fails leaves the batches before it stored; `query_resume` goes on after the last track value
    stored (the earlier rows are not read or embedded again); `error = 'skip'` records the batch and goes on."""
    kb, file = f"resume_{unique}", f"resume_{unique}"
    upload_csv(
        client, file, [(i, "poison" if i == 15 else f"passage {i}") for i in range(1, 31)], "id,content"
    )
    with OpenAIStub() as stub:
        poisoned = True

        def embed(
            texts: list[str],
        ) -> list[list[float]]:  # a vector of the wrong size fails the batch's write
            return [stub_vector(t, 3 if poisoned and t == "poison" else stub.dim) for t in texts]

        stub.embed = embed
        stub_kb(client, kb, stub)
        record = table(
            client, f"INSERT INTO {kb} SELECT * FROM files.{file} USING batch_size = 10, track_column = id"
        )
        failed = wait_query(client, record[0]["ID"])
        assert failed["ERROR"] and failed["PROCESSED_ROWS"] == 10 and failed["CONTEXT"] == {"track_value": 10}
        assert len(table(client, f"SELECT id FROM {kb}")) == 10

        poisoned = False
        texts_before = stub.texts
        table(client, f"SELECT query_resume({record[0]['ID']})")
        done = wait_query(client, record[0]["ID"])
        assert (
            done["ERROR"] is None and done["PROCESSED_ROWS"] == 30 and done["CONTEXT"] == {"track_value": 30}
        )
        assert len(table(client, f"SELECT id FROM {kb}")) == 30
        assert stub.texts - texts_before == 20  # rows 11..30 only

        poisoned = True
        ok(client, f"DELETE FROM {kb} WHERE id > 0")
        record = table(
            client,
            f"INSERT INTO {kb} SELECT * FROM files.{file} USING batch_size = 10, track_column = id, error = 'skip'",
        )
        done = wait_query(client, record[0]["ID"])
        assert done["ERROR"] is None and done["PROCESSED_ROWS"] == 30
        assert sorted(r["id"] for r in table(client, f"SELECT id FROM {kb}")) == [
            *range(1, 11),
            *range(21, 31),
        ]
        job = client.get(f"{P}/knowledge_bases/{kb}/jobs").json()[0]
        assert job["errors"][0]["item"] == "rows 11..20", job
    ok(client, f"DROP KNOWLEDGE_BASE {kb}")
