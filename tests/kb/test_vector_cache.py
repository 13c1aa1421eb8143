"""Small KBs' vectors ranked in the process (kb.vectors): loaded with their version in one read, they give
the very answers of PostgreSQL's exact scan (ids, order and PostgreSQL's own distances; half precision above
2,000 dimensions as PostgreSQL compares there); the cache keeps to its byte budget, loads one version at a
time per KB in the background, and leaves a KB over the size limit alone. Through HTTP with two servers on one
database: a write through one is searched at once through the other, whose vectors had become stale.
Real PostgreSQL + pgvector; the embedding server is the OpenAI-compatible stub."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import text

from agentkb.kb.search import SearchOptions, search
from agentkb.kb.vectors import MAX_CHUNKS, Loaded, VectorSet, VectorSets, margin
from agentkb.storage import chunk_search, chunks, vector_index
from agentkb.storage.chunks import ChunkWrite
from agentkb.storage.db import Database
from tests.helpers import chunk_table
from tests.kb.test_vector_delta import rows
from tests.openai_stub import OpenAIStub

P = "/api/projects/mindsdb"
V1 = datetime(2026, 1, 1, tzinfo=UTC)
V2 = V1 + timedelta(seconds=1)


def writes(rng: np.random.Generator, n: int, dim: int) -> list[ChunkWrite]:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    v[3] = v[2]  # a duplicate vector
    v[5] = 0.0  # a zero vector: its cosine distance is NaN in PostgreSQL
    return rows(v, 0)


async def stored(db: Database, table: str) -> dict[str, np.ndarray]:
    async with db.connect() as conn:
        found = (await conn.execute(text(f"SELECT chunk_id, embedding::text AS e FROM {table}"))).all()
    return {r.chunk_id: np.asarray(json.loads(r.e), dtype=np.float32) for r in found}


@pytest.mark.parametrize("dim", [16, 2048])
async def test_in_process_ranking_gives_postgresql_exact_answers(
    served: Any, pg_url: str, unique: str, dim: int
) -> None:
    table = f"kb_chunks_vcache_{dim}_{unique}"
    rng = np.random.default_rng(dim)
    async with chunk_table(pg_url, table, dim) as db:
        async with db.transaction() as conn:
            await chunks.copy_new_chunks(conn, table, writes(rng, 300, dim))
        async with db.read() as conn:
            version, ids, vecs = await chunk_search.all_vectors(conn, 0, table, dim, 1000)
        assert version is None and ids is not None and vecs is not None  # kb id 0: no KB row
        assert vecs.dtype == np.float32 and vecs.shape == (300, dim)
        table_rows = await stored(db, table)
        for chunk_id, vector in zip(ids, vecs, strict=True):  # each id with its own vector
            assert np.array_equal(vector, table_rows[chunk_id])
        held = VectorSet(V1, ids, vecs)
        assert held.half == (dim > 2000)

        queries = [*rng.standard_normal((25, dim)).astype(np.float32), table_rows["d2:c:1of1"]]
        for q in queries:
            for limit in (1, 10, 40):
                options = SearchOptions(query="q", limit=limit, hybrid=False)
                async with db.read() as conn:
                    scanned = await search(conn, 0, table, dim, options, q)
                    found = await search(conn, 0, table, dim, options, q, vectors=held)
                assert found.in_process and not scanned.in_process
                exact, ranked = scanned.hits, found.hits
                assert len(ranked) == limit
                assert [(h.chunk_id, h.distance) for h in ranked] == [
                    (h.chunk_id, h.distance) for h in exact
                ] or _tied(exact, ranked)


def _tied(exact: list[Any], ranked: list[Any]) -> bool:
    """Only rows of equal distance in another order (the duplicate vector): PostgreSQL breaks ties freely."""
    return sorted((h.distance, h.chunk_id) for h in exact) == sorted((h.distance, h.chunk_id) for h in ranked)


async def test_a_table_over_the_limit_or_indexed_is_left_to_postgresql(
    served: Any, pg_url: str, unique: str
) -> None:
    table = f"kb_chunks_vlimit_{unique}"
    rng = np.random.default_rng(1)
    async with chunk_table(pg_url, table, 16) as db:
        async with db.read() as conn:
            _, ids, vecs = await chunk_search.all_vectors(conn, 0, table, 16, 10)
        assert ids == [] and vecs is not None and vecs.shape == (0, 16) and vecs.dtype == np.float32
        async with db.transaction() as conn:
            await chunks.copy_new_chunks(conn, table, writes(rng, 11, 16))
        async with db.read() as conn:
            assert await chunk_search.all_vectors(conn, 0, table, 16, 10) == (None, None, None)
            _, ids, vecs = await chunk_search.all_vectors(conn, 0, table, 16, 11)
        assert ids is not None and vecs is not None and len(ids) == 11
        held = VectorSet(V1, ids, vecs)

        # an HNSW index over the rows (as CREATE INDEX ON KNOWLEDGE_BASE or a merge makes): the index answers
        async with db.transaction() as conn:
            await vector_index.set_watermark(conn, table, 1_000_000)
        options = SearchOptions(query="q", limit=3, hybrid=False)
        async with db.read() as conn:
            assert await chunk_search.all_vectors(conn, 0, table, 16, 11) == (None, None, None)
            found = await search(conn, 0, table, 16, options, rng.standard_normal(16), vectors=held)
        assert not found.in_process and len(found.hits) == 3


def test_nearest_takes_the_best_and_puts_zero_vectors_last() -> None:
    v = np.array([[1, 0], [0, 1], [0, 0], [1, 1], [-1, 0]], dtype=np.float32)
    held = VectorSet(V1, ["a", "b", "zero", "ab", "neg"], v)
    assert sorted(held.nearest(np.array([1.0, 0.1]), 2)) == ["a", "ab"]
    assert "zero" not in held.nearest(np.array([1.0, 0.1]), 4)
    assert sorted(held.nearest(np.array([1.0, 0.0]), 9)) == sorted(["a", "b", "zero", "ab", "neg"])
    assert held.nearest(np.array([1.0, 0.0]), 0) == []
    assert margin(10) == 18 and margin(100) == 125


def _set_of(n: int, dim: int = 8) -> Loaded:
    return Loaded(V1, [f"c{i}" for i in range(n)], np.ones((n, dim), dtype=np.float32))


async def _settled(cache: VectorSets) -> None:
    for _ in range(200):
        if not cache._loading:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("a load did not finish")


async def test_loads_in_the_background_once_per_kb_and_version() -> None:
    gate = asyncio.Event()
    calls: list[int] = []

    async def load() -> Loaded:
        calls.append(1)
        await gate.wait()
        return _set_of(4)

    cache = VectorSets(1 << 20, spacing=0)
    assert cache.get(1, V1, load) is None  # the first search finds none: PostgreSQL answers it
    assert cache.get(1, V1, load) is None  # one load at a time
    await asyncio.sleep(0)
    gate.set()
    await _settled(cache)
    held = cache.get(1, V1, load)
    assert held is not None and held.version == V1 and len(calls) == 1
    assert cache.get(1, V2, load) is None  # a write since: loaded again
    await _settled(cache)
    assert len(calls) == 2
    cache.forget(1)
    assert cache.get(1, V1, load) is None


async def test_a_version_found_indexed_is_dropped_and_not_loaded_again() -> None:
    """`decline`: the search found the table indexed since the load (the index answered): the set goes, and
    that version is not loaded again; a later version is."""
    calls: list[int] = []
    versions = [V1, V2]

    async def load() -> Loaded:
        calls.append(1)
        return Loaded(versions[len(calls) - 1], *_pair(_set_of(4)))

    cache = VectorSets(1 << 20, spacing=0)
    cache.get(1, V1, load)
    await _settled(cache)
    assert cache.get(1, V1, load) is not None and cache.nbytes > 0
    cache.decline(1, V1)
    assert cache.get(1, V1, load) is None and cache.nbytes == 0
    await _settled(cache)
    assert len(calls) == 1  # no load for the declined version
    cache.get(1, V2, load)
    await _settled(cache)
    assert cache.get(1, V2, load) is not None and len(calls) == 2
    cache.decline(1, V1)  # an older version's: the newer set stays
    assert cache.get(1, V2, load) is not None


async def test_the_byte_budget_drops_the_least_recently_used() -> None:
    one = VectorSet(V1, *_pair(_set_of(100))).nbytes
    cache = VectorSets(2 * one + one // 2, spacing=0)  # room for two sets

    async def load() -> Loaded:
        return _set_of(100)

    for kb in (1, 2):
        cache.get(kb, V1, load)
        await _settled(cache)
    assert cache.get(1, V1, load) is not None  # KB 1 used last: KB 2 goes when KB 3 comes
    cache.get(3, V1, load)
    await _settled(cache)
    assert cache.get(1, V1, load) is not None and cache.get(3, V1, load) is not None
    assert cache.get(2, V1, load) is None and cache.nbytes <= cache.max_bytes
    await _settled(cache)


def test_a_load_reads_no_more_rows_than_the_budget_holds() -> None:
    """`max_rows`: `MAX_CHUNKS`, or fewer where a set of that many would not fit the budget (a 20,000-chunk
    KB of 3,072 dimensions is 246 MB: read whole, it would only be declined)."""
    assert VectorSets(128 << 20).max_rows(384) == MAX_CHUNKS
    rows = VectorSets(128 << 20).max_rows(3072)
    assert rows < MAX_CHUNKS
    held = VectorSet(V1, [f"c{i}" for i in range(rows)], np.ones((rows, 3072), dtype=np.float32))
    assert held.nbytes <= 128 << 20 < VectorSet(V1, [*held.chunk_ids, "x"], np.ones((rows + 1, 3072))).nbytes


def _pair(loaded: Loaded) -> tuple[list[str], np.ndarray]:
    assert loaded.chunk_ids is not None and loaded.vectors is not None
    return loaded.chunk_ids, loaded.vectors


async def test_a_kb_too_large_is_tried_again_only_after_a_write(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    async def too_large() -> Loaded:
        calls.append(1)
        return Loaded(V1, None, None)

    cache = VectorSets(1 << 20, spacing=0)
    cache.get(1, V1, too_large)
    await _settled(cache)
    assert cache.get(1, V1, too_large) is None and not cache._loading and len(calls) == 1
    cache.get(1, V2, too_large)
    await _settled(cache)
    assert len(calls) == 2

    async def failing() -> Loaded:
        raise RuntimeError("connection lost")

    cache.get(2, V1, failing)
    await _settled(cache)
    assert "vectors of knowledge base 2 failed to load" in caplog.text
    assert cache.get(2, V1, lambda: asyncio.sleep(0, _set_of(3))) is None  # tried again
    await _settled(cache)
    assert cache.get(2, V1, too_large) is not None
    assert VectorSets(0).get(3, V1, too_large) is None and len(calls) == 2  # 0 MB: never loads
    await cache.aclose()


async def test_loads_of_a_kb_are_spaced_out() -> None:
    """A KB written between every two searches is not loaded again for each: the next load of a KB waits ten
    times as long as its last one took."""
    calls: list[int] = []

    async def slow() -> Loaded:
        calls.append(1)
        await asyncio.sleep(0.05)
        return _set_of(3)

    cache = VectorSets(1 << 20)
    cache.get(1, V1, slow)
    await _settled(cache)
    assert cache.get(1, V2, slow) is None and not cache._loading  # a write since: too soon to load again
    assert cache.get(2, V1, slow) is None and cache._loading  # another KB is not held back
    await _settled(cache)
    await asyncio.sleep(0.6)
    cache.get(1, V2, slow)
    await _settled(cache)
    held = cache.get(1, V1, slow)
    assert held is not None and len(calls) == 3


# -- through HTTP: two servers on one database ---------------------------------------------------


@pytest.fixture()
def stub() -> Iterator[OpenAIStub]:
    """16-dimensional vectors (equal texts, equal vectors)."""
    with OpenAIStub(dim=16) as server:
        yield server


def _counter(client: httpx.Client, outcome: str) -> float:
    name = f'agentkb_search_in_process_rankings_total{{outcome="{outcome}"}}'
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(name):
            return float(line.split()[-1])
    return 0.0


def _ids(client: httpx.Client, kb: str, query: str, where: str = "") -> list[str]:
    r = client.post(
        "/api/sql/query",
        json={"query": f"SELECT id FROM mindsdb.{kb} WHERE content = '{query}'{where} LIMIT 3"},
    )
    assert r.status_code == 200, r.text
    return [row[0] for row in r.json()["data"]]


def test_a_write_through_one_server_is_searched_at_once_through_the_other(
    client: httpx.Client, second: httpx.Client, stub: OpenAIStub, unique: str
) -> None:
    kb = f"vcache_{unique}"
    body = {
        "name": kb,
        "embedding_model": stub.embedding_model(),
        "id_column": "id",
        "content_columns": ["body"],
        "metadata_columns": ["topic"],
    }
    assert client.post(f"{P}/knowledge_bases", json={"knowledge_base": body}).status_code == 201
    data = [{"id": f"r{i}", "body": f"row {i} of plain words number{i}", "topic": "a"} for i in range(30)]
    assert client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": data}}).status_code == 200

    answered = _counter(second, "answered")
    for _ in range(100):  # the second server's first searches load the KB's vectors in the background
        assert _ids(second, kb, "row 7 of plain words number7")[0] == "r7"
        if _counter(second, "answered") > answered:
            break
    else:
        raise AssertionError("the vectors were never ranked in the process")

    stale = _counter(second, "stale")
    new = {"id": "fresh", "body": "a brand new row about lighthouses", "topic": "b"}
    assert (
        client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": [new]}}).status_code == 200
    )
    assert _ids(second, kb, new["body"])[0] == "fresh"  # its held vectors are the version before
    assert _counter(second, "stale") == stale + 1

    filtered = _counter(second, "answered")
    assert _ids(second, kb, "row 3 of plain words number3", " AND topic = 'a'")[0] == "r3"
    assert _counter(second, "answered") == filtered  # a filtered search is PostgreSQL's

    # an HNSW index built since the load (here by CREATE INDEX ON KNOWLEDGE_BASE through the first server):
    # the index answers, and the second server drops the vectors it held instead of ranking them in vain
    for _ in range(100):
        assert _ids(second, kb, "row 9 of plain words number9")[0] == "r9"
        if _counter(second, "answered") > filtered:
            break
    else:
        raise AssertionError("the new version's vectors were never ranked in the process")
    r = client.post("/api/sql/query", json={"query": f"CREATE INDEX ON KNOWLEDGE_BASE mindsdb.{kb}"})
    assert r.status_code == 200 and r.json().get("type") != "error", r.text
    answered, indexed = _counter(second, "answered"), _counter(second, "indexed")
    for n in range(3):
        assert _ids(second, kb, f"row {n} of plain words number{n}")[0] == f"r{n}"
    assert _counter(second, "answered") == answered
    assert _counter(second, "indexed") == indexed + 1  # once: the set is gone, and not loaded again

    assert client.delete(f"{P}/knowledge_bases/{kb}").status_code in (200, 204)
    r = second.post("/api/sql/query", json={"query": f"SELECT * FROM mindsdb.{kb} WHERE content = 'x'"})
    assert r.status_code == 404 or r.json().get("type") == "error", r.text
