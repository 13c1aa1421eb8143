"""Mirrored inserts: `INSERT INTO <kb> SELECT ... USING mirror = true` (and the REST insert's `mirror`) over a
SQLite data source — once the whole SELECT is stored, the documents it did not return are deleted in the
same transaction; a failing insert deletes nothing; the combinations that would delete wrongly are refused.
And beneath it (`ingest.mirror`): ids past the memory limit, kept in a temporary table, delete the same."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from agentkb.ingest.mirror import ReturnedDocuments
from agentkb.ingest.pipeline import Ingestor
from agentkb.kb.chunking import ChunkingConfig
from agentkb.kb.documents import Document
from agentkb.kb.embedders.openai import OpenAIEmbedder
from agentkb.storage import chunks
from agentkb.storage.db import Database
from tests.helpers import assert_problem
from tests.helpers import sql_error as error
from tests.helpers import sql_ok as ok
from tests.helpers import sql_rows as rows
from tests.openai_stub import OpenAIStub, Scripted

P = "/api/projects/mindsdb"


class Source:
    """A SQLite file holding `docs (id, content)`, registered as the data source `name`."""

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.name = name

    def execute(self, statement: str, *args: Any) -> None:
        with sqlite3.connect(self.path) as conn:
            conn.execute(statement, args)


@pytest.fixture()
def source(client: httpx.Client, unique: str) -> Iterator[Source]:
    # under the system's temporary directory: the data-source file directory the suite allows
    folder = Path(tempfile.mkdtemp(prefix="agentkb-mirror-"))
    found = Source(folder / "docs.db", f"lite_{unique}")
    found.execute("CREATE TABLE docs (id INTEGER PRIMARY KEY, content TEXT)")
    for i in range(1, 6):
        found.execute("INSERT INTO docs VALUES (?, ?)", i, f"document number {i} about topic {i * 7}")
    ok(
        client,
        f"CREATE DATABASE {found.name} WITH ENGINE = 'sqlite', PARAMETERS = {{'db_file': '{found.path}'}}",
    )
    yield found
    ok(client, f"DROP DATABASE {found.name}")
    shutil.rmtree(folder, ignore_errors=True)


def new_kb(client: httpx.Client, name: str, stub: OpenAIStub) -> None:
    r = client.post(
        f"{P}/knowledge_bases",
        json={"knowledge_base": {"name": name, "embedding_model": stub.embedding_model()}},
    )
    assert r.status_code == 201, r.text


def stored(client: httpx.Client, kb: str) -> dict[int, str]:
    """The knowledge base's documents: id → content."""
    return {r["id"]: r["chunk_content"] for r in rows(client, f"SELECT id, chunk_content FROM {kb}")}


def last_job(client: httpx.Client, kb: str) -> dict[str, Any]:
    return client.get(f"{P}/knowledge_bases/{kb}/jobs").json()[0]  # type: ignore[no-any-return]


def test_mirror_deletes_the_rows_deleted_at_the_source(
    client: httpx.Client, unique: str, stub: OpenAIStub, source: Source
) -> None:
    kb = f"mirror_{unique}"
    new_kb(client, kb, stub)
    select = f"SELECT id, content FROM {source.name}.docs"
    assert ok(client, f"INSERT INTO {kb} {select}")["affected_rows"] == 5
    source.execute("DELETE FROM docs WHERE id IN (2, 4)")

    ok(client, f"INSERT INTO {kb} {select}")  # without mirror the rows stay
    assert sorted(stored(client, kb)) == [1, 2, 3, 4, 5]
    assert "documents_deleted" not in last_job(client, kb)["counts"]

    ok(client, f"INSERT INTO {kb} {select} USING mirror = true")
    assert sorted(stored(client, kb)) == [1, 3, 5]
    job = last_job(client, kb)
    assert job["state"] == "succeeded", job
    assert job["counts"]["documents_deleted"] == 2 and job["counts"]["deleted"] == 2, job["counts"]
    assert job["counts"]["embedded"] == 0, job["counts"]  # the rows left were unchanged
    assert client.get(f"{P}/knowledge_bases/{kb}").json()["document_count"] == 3

    # with kb_skip_existing: the skipped documents were returned by the SELECT, so they stay
    source.execute("DELETE FROM docs WHERE id = 5")
    source.execute("INSERT INTO docs VALUES (6, 'a sixth document, new at the source')")
    ok(client, f"INSERT INTO {kb} {select} USING mirror = true, kb_skip_existing = true")
    assert sorted(stored(client, kb)) == [1, 3, 6]
    counts = last_job(client, kb)["counts"]
    assert counts["skipped_existing"] == 2 and counts["documents_deleted"] == 1, counts

    # the REST insert's `mirror`: X-Agentkb-Ingest counts the deleted chunks
    source.execute("DELETE FROM docs WHERE id = 1")
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"query": select, "mirror": True}})
    assert r.status_code == 200, r.text
    assert "deleted=1" in r.headers["x-agentkb-ingest"], r.headers["x-agentkb-ingest"]
    assert sorted(stored(client, kb)) == [3, 6]
    assert last_job(client, kb)["counts"]["documents_deleted"] == 1

    # a SELECT that returns nothing empties the knowledge base
    ok(
        client,
        f"INSERT INTO {kb} SELECT id, content FROM {source.name}.docs WHERE id > 100 USING mirror = true",
    )
    assert stored(client, kb) == {}


def test_a_failing_mirrored_insert_deletes_nothing(
    client: httpx.Client, unique: str, stub: OpenAIStub, source: Source
) -> None:
    kb = f"mirrorfail_{unique}"
    new_kb(client, kb, stub)
    select = f"SELECT id, content FROM {source.name}.docs"
    ok(client, f"INSERT INTO {kb} {select}")
    before = stored(client, kb)
    source.execute("DELETE FROM docs WHERE id IN (2, 4)")
    source.execute("UPDATE docs SET content = 'changed text, to be embedded' WHERE id = 3")

    # the embedding of the changed row fails after the SELECT was read: the insert fails whole
    stub.script_embeddings(Scripted(400, {"error": {"message": "model overloaded"}}))
    assert "model overloaded" in error(client, f"INSERT INTO {kb} {select} USING mirror = true")
    assert stored(client, kb) == before
    job = last_job(client, kb)
    assert job["state"] == "failed" and "documents_deleted" not in job["counts"], job

    # a source that fails: the same
    assert "no such table" in error(
        client, f"INSERT INTO {kb} SELECT id, content FROM {source.name}.nope USING mirror = true"
    )
    assert stored(client, kb) == before

    ok(client, f"INSERT INTO {kb} {select} USING mirror = true")  # once it succeeds, it deletes
    assert stored(client, kb) == {1: before[1], 3: "changed text, to be embedded", 5: before[5]}


def test_mirror_refuses_what_would_delete_wrongly(
    client: httpx.Client, unique: str, stub: OpenAIStub, source: Source
) -> None:
    kb = f"mirrorbad_{unique}"
    new_kb(client, kb, stub)
    select = f"SELECT id, content FROM {source.name}.docs"
    ok(client, f"INSERT INTO {kb} {select}")
    for statement, expected in (
        (
            f"{select} WHERE id > LAST USING mirror = true",
            "LAST",
        ),  # LAST is for jobs, where a mirror with it is refused too (test_sql_jobs)
        (f"{select} LIMIT 3 USING mirror = true", "cannot be used with LIMIT or OFFSET"),
        (
            f"SELECT * FROM (SELECT id, content FROM {source.name}.docs LIMIT 2) AS d USING mirror = true",
            "cannot be used with LIMIT or OFFSET",
        ),
        (f"{select} USING mirror = true, batch_size = 2", "cannot be used with batch_size"),
        (f"{select} USING mirror = 'maybe'", "USING mirror must be true or false"),
    ):
        assert expected in error(client, f"INSERT INTO {kb} {statement}"), statement
    assert sorted(stored(client, kb)) == [1, 2, 3, 4, 5]

    for body, expected in (
        ({"rows": [{"id": 9, "content": "nine"}], "mirror": True}, "takes a 'query'"),
        ({"query": select, "rows": [{"id": 9, "content": "nine"}], "mirror": True}, "no rows (VALUES)"),
        ({"urls": ["http://127.0.0.1:9/"], "mirror": True}, "takes a 'query'"),
        ({"query": f"{select} LIMIT 1", "mirror": True}, "cannot be used with LIMIT"),
    ):
        r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": body})
        assert expected in assert_problem(r, 400)["detail"], (body, r.text)
    # `mirror: false` is an ordinary insert
    r = client.put(
        f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"query": f"{select} LIMIT 1", "mirror": False}}
    )
    assert r.status_code == 200, r.text
    assert sorted(stored(client, kb)) == [1, 2, 3, 4, 5]


DIM = 8


async def _documents(batches: list[list[str]]) -> Any:
    for batch in batches:
        yield [Document(doc_id, doc_id, "content", f"text of {doc_id}") for doc_id in batch]


async def test_returned_ids_past_the_memory_limit_delete_the_same(
    served: Any, pg_url: str, unique: str
) -> None:
    db = Database(pg_url, pool_size=2)
    tables = [f"kb_chunks_mirror_{unique}_{n}" for n in range(2)]
    outcomes = []
    try:
        with OpenAIStub(dim=DIM) as stub:
            embedder = OpenAIEmbedder("stub", api_key="x", base_url=stub.url, dimensions=DIM)
            for table, limit in zip(tables, (1000, 2), strict=True):
                async with db.transaction() as conn:
                    await chunks.create_chunk_table(conn, table, DIM)
                    before = [[f"d{i}" for i in range(8)]]
                    await Ingestor(conn, 1, table, embedder, ChunkingConfig(), dim=DIM).run(
                        _documents(before)
                    )
                async with db.transaction() as conn:
                    # the ingestor's own seen ids spill too: two temporary tables in one transaction
                    ingestor = Ingestor(
                        conn, 1, table, embedder, ChunkingConfig(), dim=DIM, seen_in_memory=limit
                    )
                    returned = ReturnedDocuments(conn, limit)
                    again = [["d1", "d3"], ["d3", "d5", "d9"], ["d7"]]  # d9 is new; d0, d2, d4, d6 are gone
                    await ingestor.run(returned.recording(_documents(again)))
                    deleted = await returned.delete_others(table)
                    spilled = (returned.ids.spilled, ingestor.seen.spilled)
                async with db.connect() as conn:
                    left = await conn.execute(text(f"SELECT DISTINCT doc_id FROM {table} ORDER BY doc_id"))
                    outcomes.append((deleted, spilled, [r.doc_id for r in left]))
    finally:
        async with db.transaction() as conn:
            for table in tables:
                await chunks.drop_chunk_table(conn, table)
        await db.close()
    kept, spilled = outcomes
    assert (kept[1], spilled[1]) == ((False, False), (True, True))
    assert kept[0] == spilled[0] == (4, 4)
    assert kept[2] == spilled[2] == ["d1", "d3", "d5", "d7", "d9"]
