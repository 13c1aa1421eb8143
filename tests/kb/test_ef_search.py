"""The HNSW search breadth (pgvector's `hnsw.ef_search`): the pool's session default (AGENTKB_HNSW_EF_SEARCH,
`storage.db`), a per-statement override (`Retrieval.ef_search`), and a knowledge base's `ef_search` param
(create, PUT, ALTER), validated with clear 400s. Behavioural: over a deliberately poor HNSW graph, a wider
search finds more of the exact nearest neighbours than a narrow one. Real PostgreSQL + pgvector; the
embedding server is the OpenAI-compatible stub."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import text

from agentkb.settings import Settings
from agentkb.storage import chunk_search, chunks
from agentkb.storage.chunks import ChunkWrite
from agentkb.storage.db import Database
from tests.helpers import assert_problem
from tests.openai_stub import OpenAIStub, stub_vector
from tests.test_sql_api import ok, sql

P = "/api/projects/mindsdb"
DIM = 32
ROWS = 3000
POOR_GRAPH = {"m": 4, "ef_construction": 8}  # a sparse graph, which a narrow search gets lost in


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def recall(found: list[list[str]], exact: list[list[str]]) -> float:
    return float(np.mean([len(set(f) & set(e)) / len(e) for f, e in zip(found, exact, strict=True)]))


async def session_ef(db: Database) -> str:
    async with db.read() as conn:
        return str((await conn.execute(text("SHOW hnsw.ef_search"))).scalar_one())


async def test_pool_default_and_per_statement_breadth(served: Any, pg_url: str, unique: str) -> None:
    narrow, wide = Database(pg_url, pool_size=1, hnsw_ef_search=10), Database(pg_url, pool_size=1)
    wide_default = Database(pg_url, pool_size=1, hnsw_ef_search=1000)
    table = f"kb_chunks_ef_{unique}"
    rng = np.random.default_rng(3)
    data, queries = unit(rng, ROWS), unit(rng, 30)
    ids = [f"d{i}:c:1of1" for i in range(ROWS)]
    exact = [[ids[i] for i in np.argsort(-(data @ q), kind="stable")[:10]] for q in queries]

    async def top(db: Database, ef_search: int | None = None) -> list[list[str]]:
        out = []
        async with db.read() as conn:
            for q in queries:
                r = chunk_search.Retrieval(0, table, DIM, query=q, vector_k=10, ef_search=ef_search)
                out.append([row.chunk_id for row in (await chunk_search.retrieve(conn, r)).vector])
        return out

    try:
        async with narrow.transaction() as conn:
            await chunks.create_chunk_table(conn, table, DIM)
            writes = [ChunkWrite(ids[i], f"d{i}", f"t{i}", f"h{i}", {}, v) for i, v in enumerate(data)]
            await chunks.copy_new_chunks(conn, table, writes)
            await chunks.rebuild_vector_index(conn, table, DIM, POOR_GRAPH)  # every row under the index
        assert (await session_ef(narrow), await session_ef(wide), await session_ef(wide_default)) == (
            "10",
            "100",
            "1000",
        )
        by_default = {ef: recall(await top(db), exact) for ef, db in ((10, narrow), (1000, wide_default))}
        assert by_default[1000] >= 0.9, by_default  # a graph this poor may strand a few neighbours
        assert by_default[10] < by_default[1000] - 0.1, by_default  # the narrow list misses neighbours
        # a statement's own breadth, either way; on an autocommit connection it stays set (no SET round
        # trips for the next search of that breadth), and a search at the default sets the default again
        assert recall(await top(narrow, ef_search=1000), exact) >= 0.9
        assert recall(await top(wide_default, ef_search=10), exact) < by_default[1000] - 0.1
        assert (await session_ef(narrow), await session_ef(wide_default)) == ("1000", "10")
        assert recall(await top(narrow), exact) == by_default[10]
        assert recall(await top(wide_default), exact) == by_default[1000]
        assert (await session_ef(narrow), await session_ef(wide_default)) == ("10", "1000")
        # inside a transaction (which a rollback would undo) the session's value is set back at once
        async with narrow.transaction() as conn:
            r = chunk_search.Retrieval(0, table, DIM, query=queries[0], vector_k=10, ef_search=1000)
            await chunk_search.retrieve(conn, r)
            assert (await conn.execute(text("SHOW hnsw.ef_search"))).scalar_one() == "10"
    finally:
        async with narrow.transaction() as conn:
            await chunks.drop_chunk_table(conn, table)
        for db in (narrow, wide, wide_default):
            await db.engine.dispose()


def test_out_of_range_breadth_is_refused_before_connecting(monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in (0, 1001):
        with pytest.raises(ValueError, match="hnsw_ef_search"):
            Database("postgresql://nowhere/db", hnsw_ef_search=bad)
    monkeypatch.setenv("AGENTKB_HNSW_EF_SEARCH", "0")
    with pytest.raises(ValueError, match="hnsw_ef_search"):
        Settings()
    monkeypatch.setenv("AGENTKB_HNSW_EF_SEARCH", "400")
    assert Settings().hnsw_ef_search == 400


def test_knowledge_base_ef_search_param(client: httpx.Client, unique: str) -> None:
    with OpenAIStub(dim=DIM) as stub:
        kb = f"ef_{unique}"
        create = {"name": kb, "embedding_model": stub.embedding_model(DIM)}
        for bad in (0, 1001, "wide", 12.5, True):
            problem = assert_problem(
                client.post(
                    f"{P}/knowledge_bases",
                    json={"knowledge_base": {**create, "params": {"ef_search": bad}}},
                ),
                400,
            )
            assert "ef_search" in problem["detail"] and "1 to 1000" in problem["detail"], problem
        assert client.get(f"{P}/knowledge_bases/{kb}").status_code == 404  # nothing half-written
        r = client.post(
            f"{P}/knowledge_bases", json={"knowledge_base": {**create, "params": {"ef_search": 40}}}
        )
        assert r.status_code == 201, r.text
        assert client.get(f"{P}/knowledge_bases/{kb}").json()["params"]["ef_search"] == 40
        texts = [f"document {i}" for i in range(ROWS)]
        rows = [{"id": i, "content": t} for i, t in enumerate(texts)]
        r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows}})
        assert r.status_code == 200, r.text
        with_graph = ", ".join(f"{k} = {v}" for k, v in POOR_GRAPH.items())
        ok(client, f"CREATE INDEX ON KNOWLEDGE_BASE {kb} WITH ({with_graph})")  # every chunk indexed

        vectors = np.asarray([stub_vector(t, DIM) for t in texts], dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        questions = [f"question {j}" for j in range(30)]
        exact = []
        for q in questions:
            v = np.asarray(stub_vector(q, DIM), dtype=np.float32)
            exact.append([texts[i] for i in np.argsort(-(vectors @ v), kind="stable")[:10]])

        def searched() -> list[list[str]]:
            out = []
            for q in questions:
                r = client.post(
                    f"{P}/knowledge_bases/{kb}/search",
                    json={"query": q, "limit": 10, "hybrid_search": False},
                )
                assert r.status_code == 200, r.text
                out.append([hit["chunk_content"] for hit in r.json()])
            return out

        narrow = recall(searched(), exact)
        put = client.put(
            f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"params": {"ef_search": 1000}}}
        )
        assert put.status_code == 200, put.text
        wide = recall(searched(), exact)
        # a graph this poor may strand a few neighbours whatever the breadth: the wide list finds most
        assert wide >= 0.9 and narrow < wide - 0.1, (narrow, wide)

        bad = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"params": {"ef_search": -1}}})
        assert "ef_search" in assert_problem(bad, 400)["detail"]
        answer = sql(client, f"ALTER KNOWLEDGE_BASE {kb} USING ef_search = 'wide'")
        assert answer["type"] == "error" and "ef_search" in answer["error_message"], answer
        assert client.get(f"{P}/knowledge_bases/{kb}").json()["params"]["ef_search"] == 1000  # unchanged
        ok(client, f"ALTER KNOWLEDGE_BASE {kb} USING ef_search = 40")
        assert recall(searched(), exact) < wide - 0.1  # narrow again
        ok(client, f"ALTER KNOWLEDGE_BASE {kb} USING ef_search = null")
        assert "ef_search" not in client.get(f"{P}/knowledge_bases/{kb}").json()["params"]
