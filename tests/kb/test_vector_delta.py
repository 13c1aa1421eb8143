"""Bulk vector writes (`storage.vector_index`, `service.vector_merge`): new chunks land outside the HNSW index,
searches scan that delta exactly, merges (rebuild or incremental) move it under the index without changing
what a search finds; and vectors of the wrong size are a clear 502 with nothing written.
Real PostgreSQL + pgvector; the embedding server is the OpenAI-compatible stub."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import numpy as np
from prometheus_client import REGISTRY
from sqlalchemy import event, text

from agentkb.service.ingest.vector_merge import VectorIndexMerger
from agentkb.storage import chunk_search, chunks, vector_index
from agentkb.storage.chunks import ChunkWrite
from agentkb.storage.db import Database
from tests.helpers import assert_problem
from tests.openai_stub import OpenAIStub
from tests.test_sql_api import sql

P = "/api/projects/mindsdb"
DIM = 16


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def rows(vectors: np.ndarray, start: int) -> list[ChunkWrite]:
    return [
        ChunkWrite(f"d{start + i}:c:1of1", f"d{start + i}", f"text {start + i}", f"h{start + i}", {"n": i}, v)
        for i, v in enumerate(vectors)
    ]


async def top(db: Database, table: str, query: np.ndarray) -> list[str]:
    async with db.connect() as conn:
        found = await chunk_search.retrieve(
            conn, chunk_search.Retrieval(kb_id=0, table=table, dim=DIM, query=query, vector_k=10)
        )
        return [r.chunk_id for r in found.vector]


async def exact(db: Database, table: str, query: np.ndarray) -> list[str]:
    async with db.connect() as conn:
        stored = (
            await conn.execute(text(f"SELECT chunk_id, embedding::text AS embedding FROM {table}"))
        ).all()
    ids = [r.chunk_id for r in stored]
    vectors = np.asarray([json.loads(r.embedding) for r in stored], dtype=np.float32)
    return [ids[i] for i in np.argsort(-(vectors @ query), kind="stable")[:10]]


async def state(db: Database, table: str) -> tuple[int, list[str], int]:
    """(watermark, HNSW indexes, rows in the delta)."""
    vector_index.forget(table)
    async with db.connect() as conn:
        mark = await vector_index.watermark(conn, table)
        delta, _ = await vector_index.sizes(conn, table, mark)
        return mark, await vector_index.vector_indexes(conn, table), delta


async def test_delta_is_searched_exactly_and_merges_keep_results(
    served: Any, pg_url: str, unique: str
) -> None:
    db = Database(pg_url, pool_size=2)
    table = f"kb_chunks_delta_{unique}"
    rng = np.random.default_rng(11)
    queries = unit(rng, 6)
    try:
        async with db.transaction() as conn:
            await chunks.create_chunk_table(conn, table, DIM)
            await chunks.copy_new_chunks(conn, table, rows(unit(rng, 300), 0))
        assert await state(db, table) == (0, [f"{table}_hnsw"], 300)  # all in the delta, none indexed
        for q in queries:  # the delta is scanned exactly
            assert await top(db, table, q) == await exact(db, table, q)

        # a table smaller than the planner would search by index is not indexed (PostgreSQL scans it)
        assert await VectorIndexMerger(db, min_rows=100, min_table_rows=301).merge(table, DIM, None) == "none"
        assert await state(db, table) == (0, [f"{table}_hnsw"], 300)
        merger = VectorIndexMerger(db, min_rows=100, min_table_rows=300)
        assert await merger.merge(table, DIM, {"m": 8, "ef_construction": 40}) == "rebuilt"
        assert await state(db, table) == (300, [f"{table}_hnsw"], 0)
        async with db.connect() as conn:
            definition = await conn.scalar(
                text("SELECT indexdef FROM pg_indexes WHERE indexname = :n"), {"n": f"{table}_hnsw"}
            )
        assert "WHERE (seq <= 300)" in definition and "m='8'" in definition
        for q in queries:  # 300 vectors, ef_search 100: the graph finds the same top 10
            assert await top(db, table, q) == await exact(db, table, q)

        async with db.transaction() as conn:  # 40 new chunks and 20 replaced ones: a delta of 60
            await chunks.copy_new_chunks(conn, table, rows(unit(rng, 40), 300))
            await chunks.upsert_chunks(conn, table, rows(unit(rng, 20), 0))
        assert (await state(db, table))[2] == 60
        for q in queries:
            assert await top(db, table, q) == await exact(db, table, q)
        assert await VectorIndexMerger(db, min_rows=100, min_table_rows=0).merge(table, DIM, None) == "none"
        incremental = VectorIndexMerger(db, min_rows=50, min_table_rows=0, rebuild_fraction=1.0, batch=25)
        assert await incremental.merge(table, DIM, None) == "merged"
        assert await state(db, table) == (300, [f"{table}_hnsw"], 0)
        for q in queries:
            assert await top(db, table, q) == await exact(db, table, q)

        async with db.transaction() as conn:  # CREATE INDEX ON KNOWLEDGE_BASE: every row under a new index
            await chunks.copy_new_chunks(conn, table, rows(unit(rng, 5), 400))
            await chunks.rebuild_vector_index(conn, table, DIM, None)
        mark, indexes, delta = await state(db, table)
        assert (indexes, delta) == ([f"{table}_hnsw"], 0) and mark > 300
    finally:
        async with db.transaction() as conn:
            await chunks.drop_chunk_table(conn, table)
        await db.close()


async def test_an_hnsw_build_gets_256mb_at_least_and_keeps_a_larger_setting(
    served: Any, pg_url: str, unique: str
) -> None:
    """An explicit rebuild raises `maintenance_work_mem` to 256 MB for its transaction, but never lowers a
    larger setting (an operator's, for a graph that needs more memory to be built in memory)."""
    db = Database(pg_url, pool_size=2)
    table = f"kb_chunks_memory_{unique}"
    setting = text("SELECT current_setting('maintenance_work_mem')")
    try:
        async with db.transaction() as conn:
            await chunks.create_chunk_table(conn, table, DIM)
            await chunks.copy_new_chunks(conn, table, rows(unit(np.random.default_rng(12), 20), 0))
        for before, during in (("64MB", "256MB"), ("1GB", "1GB")):
            async with db.transaction() as conn:
                await conn.execute(text(f"SET LOCAL maintenance_work_mem = '{before}'"))
                await chunks.rebuild_vector_index(conn, table, DIM, None)
                assert await conn.scalar(setting) == during
            assert (await state(db, table))[1:] == ([f"{table}_hnsw"], 0)
    finally:
        async with db.transaction() as conn:
            await chunks.drop_chunk_table(conn, table)
        await db.close()


async def index_scans(conn: Any, table: str) -> tuple[int, int]:
    """(scans of the table's HNSW index, scans of its `seq` index) so far in this transaction."""
    row = (
        await conn.execute(
            text(
                "SELECT pg_stat_get_xact_numscans(CAST(:h AS regclass)) AS hnsw, "
                "pg_stat_get_xact_numscans(CAST(:s AS regclass)) AS seq"
            ),
            {"h": vector_index.index_name(table), "s": f"{table}_seq"},
        )
    ).one()
    return int(row.hnsw), int(row.seq)


async def test_a_table_with_nothing_indexed_is_searched_by_one_exact_scan(
    served: Any, pg_url: str, unique: str
) -> None:
    """Below the merge's minimum nothing is indexed (watermark 0): a vector search is one exact scan of the
    table, neither an HNSW search of the (empty) index beside an exact scan of `seq > 0` nor a read of that
    delta through the `seq` index (which PostgreSQL chose for a new 2,000-chunk table without statistics,
    taking `seq > 0` for a third of it): ~15 % less work for the statement (0.84-0.89 → 0.71-0.74 ms)."""
    db = Database(pg_url, pool_size=2)
    table = f"kb_chunks_scan_{unique}"
    rng = np.random.default_rng(13)
    try:
        async with db.transaction() as conn:
            await chunks.create_chunk_table(conn, table, DIM)
            await chunks.copy_new_chunks(conn, table, rows(unit(rng, 300), 0))
        query = unit(rng, 1)[0]
        async with db.connect() as conn:
            before = await index_scans(conn, table)
            found = await chunk_search.retrieve(
                conn, chunk_search.Retrieval(kb_id=0, table=table, dim=DIM, query=query, vector_k=10)
            )
            after = await index_scans(conn, table)
        assert [r.chunk_id for r in found.vector] == await exact(db, table, query)
        assert after == before  # neither index read: the rows were scanned
    finally:
        async with db.transaction() as conn:
            await chunks.drop_chunk_table(conn, table)
        await db.close()


async def test_a_merge_waits_until_inserts_settle(served: Any, pg_url: str, unique: str) -> None:
    """Inserts one after another (a bulk load) are merged once, after the last: each request for a merge
    pushes it back by `settle_s`. Meanwhile the merge is pending; once done it is counted and timed."""
    db = Database(pg_url, pool_size=2)
    table = f"kb_chunks_settle_{unique}"
    rng = np.random.default_rng(3)
    merger = VectorIndexMerger(db, min_rows=100, min_table_rows=0, settle_s=2.0)
    rebuilt = {"outcome": "rebuilt"}
    counted = REGISTRY.get_sample_value("agentkb_vector_index_merges_total", rebuilt) or 0.0
    timed = REGISTRY.get_sample_value("agentkb_vector_index_merge_seconds_count", rebuilt) or 0.0
    try:
        async with db.transaction() as conn:
            await chunks.create_chunk_table(conn, table, DIM)
            await chunks.copy_new_chunks(conn, table, rows(unit(rng, 300), 0))
        assert merger.pending == 0
        merger.schedule(table, DIM, None)
        await asyncio.sleep(1.5)
        assert (await state(db, table))[2] == 300  # still waiting
        assert merger.pending == 1
        merger.schedule(table, DIM, None)  # another insert: the wait starts again
        assert merger.pending == 1  # one table, one merge
        again = time.monotonic()
        await merger.wait()
        assert time.monotonic() - again >= 2.0
        assert await state(db, table) == (300, [f"{table}_hnsw"], 0)
        assert merger.pending == 0
        # the served app in this process may merge too: at least this merge was counted and timed
        assert (REGISTRY.get_sample_value("agentkb_vector_index_merges_total", rebuilt) or 0.0) >= counted + 1
        assert (
            REGISTRY.get_sample_value("agentkb_vector_index_merge_seconds_count", rebuilt) or 0.0
        ) >= timed + 1
    finally:
        await merger.close()
        async with db.transaction() as conn:
            await chunks.drop_chunk_table(conn, table)
        await db.close()


async def test_a_small_table_is_rebuilt_without_parallel_workers(
    served: Any, pg_url: str, unique: str
) -> None:
    """A table of at most `serial_build_rows` rows is rebuilt by one process; a larger one takes PostgreSQL's
    parallel workers. PostgreSQL says which (at DEBUG1) to the connection that builds; its minimum table size
    for parallel work is lifted, so that a small test table would be built in parallel."""
    options = "options=-c%20client_min_messages%3Ddebug1%20-c%20min_parallel_table_scan_size%3D0"
    db = Database(f"{pg_url}{'&' if '?' in pg_url else '?'}{options}", pool_size=2)
    notices: list[str] = []

    def listen(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.driver_connection.add_notice_handler(
            lambda d: notices.append(d.message_primary or "")
        )

    event.listen(db.engine.sync_engine, "connect", listen)
    table = f"kb_chunks_serial_{unique}"
    rng = np.random.default_rng(17)

    def builds() -> list[str]:
        found = [n for n in notices if n.startswith("building index")]
        notices.clear()
        return found

    try:
        async with db.transaction() as conn:
            await chunks.create_chunk_table(conn, table, DIM)
            await chunks.copy_new_chunks(conn, table, rows(unit(rng, 300), 0))
        builds()
        serial = VectorIndexMerger(db, min_rows=100, min_table_rows=0, serial_build_rows=300)
        assert await serial.merge(table, DIM, None) == "rebuilt"
        assert builds() == [f'building index "{table}_hnsw_new" on table "{table}" serially']

        async with db.transaction() as conn:  # a delta of 100 over 300 indexed rows: rebuilt again
            await chunks.copy_new_chunks(conn, table, rows(unit(rng, 100), 300))
        parallel = VectorIndexMerger(db, min_rows=100, min_table_rows=0, serial_build_rows=299)
        assert await parallel.merge(table, DIM, None) == "rebuilt"
        [built] = builds()
        assert built.startswith(f'building index "{table}_hnsw_new" on table "{table}" with request for ')
        assert built.endswith("parallel workers")
        async with db.connect() as conn:  # the pooled connection is back to the server's settings
            assert await conn.scalar(text("SHOW max_parallel_maintenance_workers")) == "2"
    finally:
        async with db.transaction() as conn:
            await chunks.drop_chunk_table(conn, table)
        await db.close()


async def test_vectors_stay_in_the_row_so_scans_read_no_toast(served: Any, pg_url: str, unique: str) -> None:
    """384-d vectors (1,540 bytes) beside ~600 characters of text: over PostgreSQL's 2 kB row threshold, yet
    the vector stays in the row (the text is compressed instead), so an exact scan of the delta reads no
    TOAST pages; and a 4,000-d vector, too large for a page, still moves out of line."""
    db = Database(pg_url, pool_size=2)
    small, large = f"kb_chunks_inline_{unique}", f"kb_chunks_inline_large_{unique}"
    rng = np.random.default_rng(5)
    text_of = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor " * 8

    def write(n: int, dim: int) -> list[ChunkWrite]:
        v = rng.standard_normal((n, dim)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return [
            ChunkWrite(f"d{i}:c:1of1", f"d{i}", f"{i} {text_of}", f"h{i}", {"n": i}, v[i]) for i in range(n)
        ]

    try:
        async with db.transaction() as conn:
            await chunks.create_chunk_table(conn, small, 384)
            await chunks.copy_new_chunks(conn, small, write(50, 384))
            await chunks.create_chunk_table(conn, large, 4000)
            await chunks.copy_new_chunks(conn, large, write(3, 4000))
        async with db.connect() as conn:  # pg_column_toast_chunk_id: NULL for a value kept in the row
            out_of_line = {
                t: await conn.scalar(text(f"SELECT count(pg_column_toast_chunk_id(embedding)) FROM {t}"))
                for t in (small, large)
            }
            storage = await conn.scalar(
                text(
                    "SELECT attstorage FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) "
                    "AND attname = 'embedding'"
                ),
                {"t": small},
            )
        assert storage == "m"
        assert out_of_line == {small: 0, large: 3}  # 16,000 bytes cannot stay in an 8 kB page
    finally:
        async with db.transaction() as conn:
            await chunks.drop_chunk_table(conn, small)
            await chunks.drop_chunk_table(conn, large)
        await db.close()


def test_vectors_of_another_size_than_assumed_are_a_502_naming_both(
    client: httpx.Client, unique: str
) -> None:
    """A KB of `text-embedding-3-small` (1,536 dimensions, known by name) on a server returning 384."""
    with OpenAIStub(dim=384) as server:
        kb = f"dims_{unique}"
        model = {"provider": "openai", "model_name": "text-embedding-3-small", "base_url": server.url}
        r = client.post(
            f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb, "embedding_model": model}}
        )
        assert r.status_code == 201, r.text
        many = [{"id": i, "content": f"document number {i}"} for i in range(300)]  # more than one batch
        problem = assert_problem(
            client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": many}}), 502
        )
        assert "384" in problem["detail"] and "1536" in problem["detail"], problem
        assert problem["title"] == "Embedding size mismatch"
        body = client.get(f"{P}/knowledge_bases/{kb}").json()
        assert (body["document_count"], body["chunk_count"]) == (0, 0)
        with_size = {**model, "dimensions": 384}  # the fix the message names
        r = client.post(
            f"{P}/knowledge_bases",
            json={"knowledge_base": {"name": f"{kb}_ok", "embedding_model": with_size}},
        )
        assert r.status_code == 201, r.text
        r = client.put(f"{P}/knowledge_bases/{kb}_ok", json={"knowledge_base": {"rows": many[:3]}})
        assert r.status_code == 200, r.text


async def test_an_explicit_rebuild_waits_for_a_running_merge(
    served: Any, client: httpx.Client, pg_url: str, unique: str
) -> None:
    """`CREATE INDEX ON KNOWLEDGE_BASE … WITH (…)` while a background merge holds the table (here: its lock,
    held by the test) waits for it: a merge's swap drops the table's other HNSW indexes, so a rebuild done
    beside it could be replaced by an index built as asked before. Once the merge lets go, the rebuild's
    index (with its options) is the one left."""
    kb = f"rebuild_{unique}"
    db = Database(pg_url, pool_size=2)
    with OpenAIStub(dim=DIM) as stub:
        r = client.post(
            f"{P}/knowledge_bases",
            json={"knowledge_base": {"name": kb, "embedding_model": stub.embedding_model(DIM)}},
        )
        assert r.status_code == 201, r.text
        rows_in = [{"id": i, "content": f"text {i}"} for i in range(40)]
        r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows_in}})
        assert r.status_code == 200, r.text
        try:
            async with db.read() as conn:
                table = await conn.scalar(
                    text("SELECT storage_table FROM knowledge_bases WHERE name = :n"), {"n": kb}
                )
                options = text("SELECT array_to_string(reloptions, ',') FROM pg_class WHERE relname = :i")
                assert await vector_index.try_merge_lock(conn, table)  # as a running merge holds it
                rebuild = asyncio.create_task(
                    asyncio.to_thread(
                        sql, client, f"CREATE INDEX ON KNOWLEDGE_BASE {kb} WITH (m = 6, ef_construction = 12)"
                    )
                )
                await asyncio.sleep(1.5)
                assert not rebuild.done()  # waits while the merge runs
                assert await conn.scalar(options, {"i": f"{table}_hnsw"}) is None  # the old index, untouched
                await vector_index.merge_unlock(conn, table)
                answer = await asyncio.wait_for(rebuild, 30)
                assert answer["type"] == "ok", answer
                assert await conn.scalar(options, {"i": f"{table}_hnsw"}) == "m=6,ef_construction=12"
        finally:
            client.delete(f"{P}/knowledge_bases/{kb}")
            await db.close()
