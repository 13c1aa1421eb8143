"""Document fingerprints (`kb.chunking.source_fingerprint`, kept with each chunk as `doc_fingerprint`): an
insert of an unchanged document finds it unchanged without chunking it again, and whatever else touched its
chunks since (a chunk deleted, a chunk updated on its own, chunks stored before fingerprints, a document
rewritten in part) makes the insert compare it chunk by chunk, as it always did. Real PostgreSQL + pgvector;
the embedding server is the OpenAI-compatible stub."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from agentkb.ingest import pipeline
from agentkb.ingest.pipeline import Ingestor, IngestStats
from agentkb.kb.chunking import Chunk, ChunkingConfig, chunk_document
from agentkb.kb.documents import Document
from agentkb.kb.embedders.openai import OpenAIEmbedder
from agentkb.storage import chunks
from agentkb.storage.db import Database
from tests.openai_stub import OpenAIStub

DIM = 8
CONFIG = ChunkingConfig(60, 10)  # "long" below makes several chunks
LONG = " ".join(f"Sentence {i} of the long document." for i in range(12))
DOCS = {"short": ("a short document", {"topic": "a"}), "long": (LONG, {"topic": "b"})}


async def _batch(docs: dict[str, tuple[str, dict[str, Any]]]) -> AsyncIterator[list[Document]]:
    yield [Document(d, d, "content", content, metadata) for d, (content, metadata) in docs.items()]


class Chunked:
    """Counts the documents the pipeline chunks."""

    def __init__(self) -> None:
        self.documents: list[str] = []

    def __call__(self, doc: Document, config: ChunkingConfig, updated_at: str) -> list[Chunk]:
        self.documents.append(doc.doc_id)
        return chunk_document(doc, config, updated_at)


@pytest.fixture
def chunked(monkeypatch: pytest.MonkeyPatch) -> Iterator[Chunked]:
    counter = Chunked()
    monkeypatch.setattr(pipeline, "chunk_document", counter)
    yield counter


async def test_fingerprints_spare_chunking_and_never_hide_a_change(
    served: Any, pg_url: str, unique: str, chunked: Chunked
) -> None:
    db = Database(pg_url, pool_size=2)
    table = f"kb_chunks_fingerprints_{unique}"

    async def insert(docs: dict[str, tuple[str, dict[str, Any]]]) -> IngestStats:
        chunked.documents.clear()
        async with db.transaction() as conn:
            return await Ingestor(conn, 1, table, embedder, CONFIG, dim=DIM).run(_batch(docs))

    async def sql(statement: str) -> list[Any]:
        async with db.transaction() as conn:
            result = await conn.execute(text(statement))
            return list(result.all()) if result.returns_rows else []

    try:
        with OpenAIStub(dim=DIM) as stub:
            embedder = OpenAIEmbedder("stub", api_key="x", base_url=stub.url, dimensions=DIM)
            async with db.transaction() as conn:
                await chunks.create_chunk_table(conn, table, DIM)
            first = await insert(DOCS)
            n = first.written
            assert n > 3 and chunked.documents == ["long", "short"]
            fingerprints = await sql(f"SELECT DISTINCT doc_id, doc_fingerprint FROM {table} ORDER BY doc_id")
            assert [d for d, _ in fingerprints] == ["long", "short"]
            assert fingerprints[0][1].endswith(f":{n - 1}") and fingerprints[1][1].endswith(":1")

            again = await insert(DOCS)  # unchanged: nothing chunked, nothing written
            assert (again.unchanged, again.written, again.chunks) == (n, 0, n) and chunked.documents == []

            changed = await insert({**DOCS, "short": ("a short document", {"topic": "c"})})
            assert (changed.unchanged, changed.written) == (n - 1, 1) and chunked.documents == ["short"]

            # a chunk deleted on its own: the document is chunked again and the chunk written back
            await sql(f"DELETE FROM {table} WHERE chunk_id LIKE 'long:content:2of%'")
            restored = await insert({**DOCS, "short": ("a short document", {"topic": "c"})})
            assert (restored.unchanged, restored.written) == (n - 1, 1) and chunked.documents == ["long"]
            assert len(await sql(f"SELECT 1 FROM {table}")) == n

            # a chunk updated on its own (as `UPDATE ... SET metadata`, which writes no fingerprint)
            (stored,) = await sql(
                f"SELECT chunk_id, doc_id, content, content_hash FROM {table} WHERE doc_id = 'short'"
            )
            async with db.transaction() as conn:
                await chunks.upsert_chunks(
                    conn,
                    table,
                    [chunks.ChunkWrite(*stored, {"topic": "edited"}, np.ones(DIM, dtype=np.float32))],
                )
            rewritten = await insert({**DOCS, "short": ("a short document", {"topic": "c"})})
            assert (rewritten.unchanged, rewritten.written) == (n - 1, 1) and chunked.documents == ["short"]
            topic = await sql(f"SELECT metadata->>'topic' FROM {table} WHERE doc_id = 'short'")
            assert topic == [("c",)]

            # a document changed at its end: its unchanged chunks take the new fingerprint with the new one
            edited = LONG.replace("Sentence 11 of the long document.", "Sentence 11 of the long texts.")
            longer = {**DOCS, "short": ("a short document", {"topic": "c"}), "long": (edited, {"topic": "b"})}
            grown = await insert(longer)
            assert (grown.unchanged, grown.written, grown.deleted) == (n - 1, 1, 1)
            assert chunked.documents == ["long"]
            kept = await insert(longer)
            assert (kept.written, chunked.documents) == (0, [])
            assert len(await sql(f"SELECT DISTINCT doc_fingerprint FROM {table} WHERE doc_id = 'long'")) == 1

            # another fingerprint for the same chunks (other settings that chunk them alike): compared chunk by
            # chunk once, then fingerprinted anew
            await sql(f"UPDATE {table} SET doc_fingerprint = 'other:1' WHERE doc_id = 'short'")
            other = await insert(longer)
            assert (other.written, other.unchanged, chunked.documents) == (0, kept.unchanged, ["short"])
            healed = await insert(longer)
            assert (healed.written, healed.unchanged, chunked.documents) == (0, kept.unchanged, [])

            # chunks stored before fingerprints: found unchanged chunk by chunk, and left as they are
            await sql(f"UPDATE {table} SET doc_fingerprint = NULL")
            old = await insert(longer)
            assert (old.written, old.unchanged) == (0, kept.unchanged)
            assert sorted(chunked.documents) == ["long", "short"]
            assert await sql(f"SELECT 1 FROM {table} WHERE doc_fingerprint IS NOT NULL") == []
    finally:
        async with db.transaction() as conn:
            await chunks.drop_chunk_table(conn, table)
        await db.close()
