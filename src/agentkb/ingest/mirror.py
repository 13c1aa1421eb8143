"""A mirrored insert (`INSERT INTO <kb> SELECT ... USING mirror = true`, the REST insert's `mirror`): after
the whole SELECT has been written, the knowledge base's documents that it did not return are deleted, in the
insert's own transaction, so a KB kept in sync with a table never keeps rows deleted at the source.

The ids of the documents the SELECT's rows made are recorded as its batches pass on to the ingestor, in
memory and, past `SEEN_IN_MEMORY` of them, in a temporary table of the transaction (`SeenDocuments`); the
deletion is then one statement (`storage.chunks.delete_documents_except`). Every id counts, those of
documents `kb_skip_existing` leaves as they are included; a row whose content is empty makes no document,
so its stored document is deleted too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.ingest.pipeline import SEEN_IN_MEMORY, SeenDocuments
from agentkb.kb.documents import Document
from agentkb.storage import chunks as store


class ReturnedDocuments:
    """The ids of the documents an insert's SELECT returned, within the insert's transaction (`conn`)."""

    def __init__(self, conn: AsyncConnection, limit: int = SEEN_IN_MEMORY) -> None:
        self.conn = conn
        self.ids = SeenDocuments(conn, limit, table=store.RETURNED_TABLE)

    async def recording(self, batches: AsyncIterator[list[Document]]) -> AsyncIterator[list[Document]]:
        """`batches` as they are, each one's document ids recorded on the way."""
        async for documents in batches:
            await self.ids.add(sorted({d.doc_id for d in documents}))
            yield documents

    async def delete_others(self, table: str) -> tuple[int, int]:
        """Once the whole SELECT is written: delete the documents of the chunk table `table` that it did not
        return; (documents, chunks) deleted."""
        if self.ids.spilled:
            return await store.delete_documents_except(self.conn, table, None, self.ids.table)
        return await store.delete_documents_except(self.conn, table, sorted(self.ids.ids))
