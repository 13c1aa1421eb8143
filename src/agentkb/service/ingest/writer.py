"""`ChunkWriter`: the steps every insert into a knowledge base shares, whole or partitioned — lock the KB's
row for the transaction, build its `Ingestor` (the KB's embedder, chunking and the insert's options), and
after the commit ask for the new chunks to be merged into the HNSW index (`vector_merge`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.errors import BadRequest, NotFound
from agentkb.ingest.pipeline import Ingestor, IngestStats
from agentkb.kb.embedders.registry import EmbedderRegistry
from agentkb.secrecy import SecretBox
from agentkb.service.catalog.kb_admin import read_chunking
from agentkb.service.ingest.contexts import ChunkContextService
from agentkb.service.ingest.vector_merge import VectorIndexMerger
from agentkb.storage import knowledge_bases as repo
from agentkb.storage.knowledge_bases import KnowledgeBaseRow


class ChunkWriter:
    def __init__(
        self,
        embedders: EmbedderRegistry,
        box: SecretBox,
        merger: VectorIndexMerger,
        contexts: ChunkContextService | None = None,
    ) -> None:
        """`contexts`: contextual chunking's LLM (without it, a KB with contextual preprocessing refuses
        inserts)."""
        self.embedders = embedders
        self.box = box
        self.merger = merger  # the delta of new chunks into the HNSW index, in the background
        self.contexts = contexts

    async def lock(self, conn: AsyncConnection, kb_id: int) -> KnowledgeBaseRow:
        """The job's knowledge base, its row locked until `conn`'s transaction ends."""
        kb = await repo.get_by_id(conn, kb_id, for_update=True)
        if kb is None:
            raise NotFound("The knowledge base of this job was deleted", title="Knowledge Base not found")
        return kb

    def ingestor(
        self,
        conn: AsyncConnection,
        kb: KnowledgeBaseRow,
        options: Mapping[str, Any],
        on_batch: Callable[[IngestStats], Awaitable[None]] | None = None,
    ) -> Ingestor:
        """An Ingestor into `kb` with the insert's `kb_skip_existing` / `kb_no_upsert` options."""
        embedder = self.embedders.get(
            self.box.reveal(kb.embedding_model, f"knowledge base {kb.name} embedding_model")
        )
        chunking = read_chunking(kb.params, self.box, kb.name)
        contexts = None
        if chunking.contextual is not None:
            if self.contexts is None:
                raise BadRequest(
                    "Contextual preprocessing is not available on this server", title="Unsupported insert"
                )
            contexts = self.contexts.for_kb(kb.id, chunking.contextual)
        return Ingestor(
            conn,
            kb.id,
            kb.storage_table,
            embedder,
            chunking,
            on_batch=on_batch,
            skip_existing=bool(options.get("kb_skip_existing")),
            no_upsert=bool(options.get("kb_no_upsert")),
            dim=kb.vector_dim,
            contexts=contexts,
        )

    def written(self, kb: KnowledgeBaseRow, ingestor: Ingestor) -> None:
        """After the commit: new chunks sit outside the HNSW index, to be merged once there are enough."""
        if ingestor.stats.written:
            self.merger.schedule(kb.storage_table, kb.vector_dim, kb.params.get("vector_index"))
