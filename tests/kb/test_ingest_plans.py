"""An insert's statements bind lists of ids whose length decides their plan (`storage.chunks.
plan_with_given_lists`): PostgreSQL plans them for the list at hand however often they run, never with a generic
plan kept for a prepared statement (made for a list of unknown length, it took 100 times longer for 1,000
documents), and by index, statistics or none. Real PostgreSQL + pgvector; the embedding server is the
OpenAI-compatible stub."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import text

from agentkb.ingest.pipeline import Ingestor
from agentkb.ingest.request import row_batches
from agentkb.kb.chunking import ChunkingConfig
from agentkb.kb.documents import ColumnSpec, row_documents
from agentkb.kb.embedders.base import Embedder
from agentkb.kb.embedders.registry import EmbedderRegistry
from agentkb.storage import chunks
from agentkb.storage.db import Database
from tests.openai_stub import OpenAIStub

DIM = 8
RUNS = 12  # psycopg prepares a statement after its fifth run; PostgreSQL may go generic after five more


async def test_the_statements_of_repeated_inserts_are_planned_for_their_lists(
    served: Any, pg_url: str, unique: str
) -> None:
    table = f"kb_chunks_plans_{unique}"
    rows = [{"id": i, "content": f"document {i} of the plans test"} for i in range(600)]
    spec = ColumnSpec("id", ("content",), None)
    async with _chunk_table(pg_url, table) as (db, embedder, stub):
        modes: list[str] = []
        for _ in range(RUNS):  # the same documents again and again: nothing changes after the first
            async with db.transaction() as conn:
                ingestor = Ingestor(conn, 1, table, embedder, ChunkingConfig(), dim=DIM)

                async def batches() -> Any:
                    # read inside the insert's transaction, after `run` started and before its first batch
                    modes.append(str(await conn.scalar(text("SHOW plan_cache_mode"))))
                    async for batch in row_batches(rows, spec):
                        yield batch

                stats = await ingestor.run(batches())
                assert stats.documents == 600
        assert stub.texts == 600  # embedded once: the later runs found every chunk unchanged
        assert set(modes) == {"force_custom_plan"}
        async with db.connect() as conn:  # the same pooled session: its prepared statements
            # SET LOCAL: the insert's transaction only
            assert await conn.scalar(text("SHOW plan_cache_mode")) == "auto"
            assert await conn.scalar(text("SHOW enable_seqscan")) == "on"
            generic = (
                await conn.execute(
                    text(
                        "SELECT statement, generic_plans FROM pg_prepared_statements "
                        "WHERE statement LIKE :t AND generic_plans > 0"
                    ),
                    {"t": f"%{table}%"},
                )
            ).all()
            prepared = await conn.scalar(
                text("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE :t"),
                {"t": f"%{table}%"},
            )
        assert prepared, "psycopg prepared none of the insert's statements: the runs did not repeat them"
        assert generic == []


async def test_an_insert_of_many_batches_reads_its_tables_by_index(
    served: Any, pg_url: str, unique: str
) -> None:
    """One statement inserting many batches (an `INSERT ... SELECT` of a million rows) is one transaction: the
    rows it wrote have no statistics (autovacuum cannot see them), and without them PostgreSQL takes `doc_id =
    ANY(<256 ids>)` to match most rows and scans the whole chunk table for each batch's look-ups (the 1,000,000
    rows of `bench writes --source-rows` went at 1,000 rows/s and slowing). Every look-up of the insert goes by
    an index: no sequential scan of the chunk table, nor of its table of documents seen, by the transaction."""
    table = f"kb_chunks_scans_{unique}"
    rows = [{"id": i, "content": f"document {i} of the scans test"} for i in range(3000)]
    spec = ColumnSpec("id", ("content",), None)
    async with _chunk_table(pg_url, table) as (db, embedder, _stub):
        async with db.transaction() as conn:
            # the counts the session has not yet reported hold the chunk table's index builds: a baseline
            before = await _scans(conn, table)
            # a small memory of documents seen: the later batches check the temporary table too
            ingestor = Ingestor(conn, 1, table, embedder, ChunkingConfig(), dim=DIM, seen_in_memory=500)
            stats = await ingestor.run(_batches(rows, spec, 256))
            assert stats.documents == 3000
            after = await _scans(conn, table)
        seq, idx = (after[table][i] - before.get(table, (0, 0))[i] for i in (0, 1))
        assert idx > 0 and seq == 0, (before, after)  # the look-ups ran, each by an index
        seen_seq, seen_idx = after[chunks.SEEN_TABLE]
        # its one scan: the primary key built when the (empty) temporary table is created
        assert seen_idx > 0 and seen_seq <= 1, after


@asynccontextmanager
async def _chunk_table(pg_url: str, table: str) -> AsyncIterator[tuple[Database, Embedder, OpenAIStub]]:
    """A chunk table `table` of `DIM`-sized vectors, a one-connection database and the stub's embedder; all
    dropped and closed after."""
    db = Database(pg_url, pool_size=1)
    registry = EmbedderRegistry()
    with OpenAIStub(dim=DIM) as stub:
        try:
            async with db.transaction() as conn:
                await chunks.create_chunk_table(conn, table, DIM)
            yield db, registry.get(stub.embedding_model(DIM)), stub
        finally:
            async with db.transaction() as conn:
                await chunks.drop_chunk_table(conn, table)
            await registry.aclose()
            await db.close()


async def _batches(rows: list[dict[str, Any]], spec: ColumnSpec, size: int) -> Any:
    for start in range(0, len(rows), size):  # as a data source's rows arrive: 256 at a time
        yield list(row_documents(rows[start : start + size], spec, start_index=start))


async def _scans(conn: Any, table: str) -> dict[str, tuple[int, int]]:
    """(sequential scans, index scans) of the chunk table and of the documents-seen table, by this session."""
    rows = await conn.execute(
        text("SELECT relname, seq_scan, idx_scan FROM pg_stat_xact_user_tables WHERE relname IN (:t, :seen)"),
        {"t": table, "seen": chunks.SEEN_TABLE},
    )
    return {name: (int(seq), int(idx)) for name, seq, idx in rows}
