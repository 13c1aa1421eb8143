"""Inserts of many documents. Past `LOCKED_DOCUMENTS` documents an insert locks the whole knowledge base
instead of each document, as PostgreSQL's lock table is bounded. An insert remembers the documents it has
written (`ingest.pipeline.SeenDocuments`): a later batch naming one again rewrites it, and `kb_skip_existing`
never skips it; past its memory limit the ids move to a temporary table of the insert's transaction, and the
counts and what is stored stay exactly the same. Real PostgreSQL + pgvector; the embedding server is the
OpenAI-compatible stub."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import text

from agentkb.ingest.pipeline import Ingestor, IngestStats
from agentkb.kb.chunking import ChunkingConfig
from agentkb.kb.documents import Document
from agentkb.kb.embedders.openai import OpenAIEmbedder
from agentkb.storage import chunks
from agentkb.storage.db import Database
from tests.openai_stub import OpenAIStub

DIM = 8
BEFORE = {f"d{i}": f"document {i} as stored before" for i in range(2)}
BATCHES = [  # d0, d1 stored before; d2 changes in the second batch; every batch names earlier ones again
    {**BEFORE, **{f"d{i}": f"document {i}" for i in range(2, 5)}},
    {"d0": BEFORE["d0"], "d2": "document 2, changed", "d5": "document 5"},
    {"d1": BEFORE["d1"], "d3": "document 3"},
]


async def _batches(batches: list[dict[str, str]]) -> AsyncIterator[list[Document]]:
    for batch in batches:
        yield [Document(doc_id, doc_id, "content", content) for doc_id, content in batch.items()]


async def _insert(
    db: Database, table: str, embedder: OpenAIEmbedder, *, seen_in_memory: int, skip_existing: bool
) -> tuple[IngestStats, int, bool, list[Any]]:
    async with db.transaction() as conn:
        await chunks.create_chunk_table(conn, table, DIM)
        await Ingestor(conn, 1, table, embedder, ChunkingConfig(), dim=DIM).run(_batches([BEFORE]))
    async with db.transaction() as conn:
        ingestor = Ingestor(
            conn,
            1,
            table,
            embedder,
            ChunkingConfig(),
            dim=DIM,
            skip_existing=skip_existing,
            seen_in_memory=seen_in_memory,
        )
        stats = await ingestor.run(_batches(BATCHES))
        spilled = ingestor.seen.spilled
    async with db.connect() as conn:
        stored = (
            await conn.execute(text(f"SELECT chunk_id, content, content_hash FROM {table} ORDER BY chunk_id"))
        ).all()
        left = await conn.scalar(  # the temporary table went with the transaction
            text("SELECT count(*) FROM pg_class WHERE relname = :n AND relpersistence = 't'"),
            {"n": chunks.SEEN_TABLE},
        )
    return stats, ingestor.skipped + int(left or 0), spilled, [tuple(r) for r in stored]


async def test_documents_seen_past_the_memory_limit_behave_the_same(
    served: Any, pg_url: str, unique: str
) -> None:
    db = Database(pg_url, pool_size=2)
    tables = [f"kb_chunks_seen_{unique}_{n}" for n in range(4)]
    try:
        with OpenAIStub(dim=DIM) as stub:
            embedder = OpenAIEmbedder("stub", api_key="x", base_url=stub.url, dimensions=DIM)
            for skip, (memory, spill) in ((False, tables[:2]), (True, tables[2:])):
                kept = await _insert(db, memory, embedder, seen_in_memory=1000, skip_existing=skip)
                spilled = await _insert(db, spill, embedder, seen_in_memory=2, skip_existing=skip)
                assert (kept[2], spilled[2]) == (False, True)
                assert (kept[0], kept[1], kept[3]) == (spilled[0], spilled[1], spilled[3])
                stats, skipped, _, stored = kept
                if skip:  # d0, d1 were stored before this insert: skipped each time; the others rewritten
                    assert (stats.written, stats.unchanged, skipped) == (6, 0, 4)
                else:  # only the first sight of d0, d1 is unchanged; naming a seen document rewrites it
                    assert (stats.written, stats.unchanged, skipped) == (8, 2, 0)
                assert "document 2, changed" in [r[1] for r in stored] and len(stored) == 6
    finally:
        async with db.transaction() as conn:
            for table in tables:
                await chunks.drop_chunk_table(conn, table)
        await db.close()


async def _kb_lock_free(db: Database, kb_id: int) -> bool:
    """Whether another transaction can hold the KB's lock shared (as an insert of a few documents does)."""
    async with db.transaction() as conn:
        return bool(
            await conn.scalar(
                text("SELECT pg_try_advisory_xact_lock_shared(hashtextextended(:k, 0))"),
                {"k": f"kb-documents:{kb_id}"},
            )
        )


async def test_an_insert_of_many_documents_locks_the_knowledge_base(
    served: Any, pg_url: str, unique: str
) -> None:
    db = Database(pg_url, pool_size=3)
    table = f"kb_chunks_locks_{unique}"
    kb_id = 2_000_000_000 - len(unique)  # a key no served knowledge base uses
    try:
        with OpenAIStub(dim=DIM) as stub:
            embedder = OpenAIEmbedder("stub", api_key="x", base_url=stub.url, dimensions=DIM)
            async with db.transaction() as conn:
                await chunks.create_chunk_table(conn, table, DIM)
            held = []
            for budget in (1000, 5):  # 10 documents: within the budget, then past it at the second batch
                async with db.transaction() as conn:
                    ingestor = Ingestor(
                        conn, kb_id, table, embedder, ChunkingConfig(), dim=DIM, locked_documents=budget
                    )
                    await ingestor.run(_batches(BATCHES))
                    locks = await conn.scalar(
                        text(
                            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
                        )
                    )
                    held.append((locks, await _kb_lock_free(db, kb_id)))
            # one lock per document and the KB's shared; then the first batch's 5, the KB's shared and exclusive
            assert held == [(6 + 1, True), (5 + 2, False)]
            assert await _kb_lock_free(db, kb_id)  # gone with the transaction
    finally:
        async with db.transaction() as conn:
            await chunks.drop_chunk_table(conn, table)
        await db.close()
