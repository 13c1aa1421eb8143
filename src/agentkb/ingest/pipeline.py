"""Documents → chunks → vectors → the KB's chunk table, in batches, inside the caller's transaction.

Per batch: chunk the documents, lock them (advisory locks, so concurrent inserts of one document
serialise; an insert of more than `LOCKED_DOCUMENTS` documents locks the whole knowledge base instead, as
PostgreSQL's lock table is bounded), diff against what is stored, reuse stored vectors of identical text (by content hash), embed
only new text, then replace each document's chunks: chunks whose ids are not stored go in with one binary
`COPY`, the others are upserted. Embedding of batch N overlaps the write of batch N-1, and within a batch
the texts are embedded in parts (`EMBED_PART`), each written as soon as its vectors are back. Vectors whose
size is not the table's (a size assumed from a model name that the provider does not keep) fail the insert
with a 502 naming both sizes; the caller's transaction is rolled back, so nothing is kept.

MindsDB's insert options (`INSERT ... USING`): `skip_existing` (`kb_skip_existing`) leaves documents whose id is
already stored as they are, neither embedded nor written; `no_upsert` (`kb_no_upsert`, for a first load) reads
nothing back: no diff, no reuse of stored vectors, no removal of a document's other chunks.

Memory stays bounded however many rows a streamed insert (a SELECT, files) brings: batches are planned,
embedded and written one after another, and the ids of the documents already written (`SeenDocuments`) move
from memory to a temporary table of the insert's transaction past `SEEN_IN_MEMORY` of them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb import metrics
from agentkb.errors import UpstreamError
from agentkb.kb.chunking import Chunk, ChunkingConfig, chunk_document, source_fingerprint
from agentkb.kb.documents import Document
from agentkb.kb.embedders.base import Embedder
from agentkb.kb.preprocessing import CONTEXTUAL
from agentkb.storage import chunks as store
from agentkb.storage.chunks import ChunkWrite

if TYPE_CHECKING:
    import numpy as np


@dataclass(slots=True)
class IngestStats:
    documents: int = 0
    chunks: int = 0
    unchanged: int = 0
    written: int = 0
    embedded: int = 0
    reused_vectors: int = 0
    deleted: int = 0

    def add(self, other: IngestStats) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_counts(cls, counts: dict[str, object]) -> IngestStats:
        return cls(**{name: int(counts.get(name, 0) or 0) for name in cls.__slots__})  # type: ignore[call-overload]


def _count(stats: IngestStats) -> None:
    """One written batch's work in the process's metrics (agentkb.metrics)."""
    metrics.ingest_documents.inc(stats.documents)
    metrics.ingest_chunks_written.inc(stats.written)
    metrics.ingest_chunks_unchanged.inc(stats.unchanged)
    metrics.ingest_chunks_deleted.inc(stats.deleted)
    metrics.ingest_embeddings.inc(stats.embedded)
    metrics.ingest_vectors_reused.inc(stats.reused_vectors)


LOCKED_DOCUMENTS = (
    1_000  # documents an insert locks one by one; past that, the whole KB (`lock_all_documents`)
)
EMBED_PART = 256  # texts per embedding request of a batch: a part is written while the next ones are embedded
SEEN_IN_MEMORY = 100_000  # document ids an insert keeps in memory (~10 MB); past that, a temporary table


class SeenDocuments:
    """The documents one insert has written so far: a later batch that names one again rewrites it (its
    chunks may postdate what that batch read) instead of diffing it against what this insert wrote, and
    `skip_existing` never skips it. Up to `limit` ids are kept in memory; past that they all move to a
    temporary table dropped with the insert's transaction (`storage.chunks.create_seen_documents`)."""

    def __init__(
        self, conn: AsyncConnection, limit: int = SEEN_IN_MEMORY, table: str = store.SEEN_TABLE
    ) -> None:
        """`table`: the temporary table's name (another set of ids in the same transaction needs its own)."""
        self.conn = conn
        self.limit = limit
        self.table = table
        self.ids: set[str] = set()
        self.spilled = False

    async def among(self, doc_ids: list[str]) -> set[str]:
        if self.spilled:
            return await store.seen_documents_among(self.conn, doc_ids, self.table)
        return self.ids.intersection(doc_ids)

    async def add(self, doc_ids: list[str]) -> None:
        if self.spilled:
            await store.add_seen_documents(self.conn, doc_ids, self.table)
            return
        self.ids.update(doc_ids)
        if len(self.ids) > self.limit:
            await store.create_seen_documents(self.conn, sorted(self.ids), self.table)
            self.ids = set()
            self.spilled = True


@dataclass(slots=True)
class _Plan:
    doc_ids: list[str]
    keep: list[str]  # every chunk id the documents now have
    writes: list[Chunk]  # chunks to insert or update
    fresh: set[str]  # ids of `writes` that are not stored: copied in rather than upserted
    vectors: dict[str, np.ndarray]  # content hash -> stored vector (reused)
    to_embed: list[Chunk] = field(default_factory=list)
    stats: IngestStats = field(default_factory=IngestStats)
    rewritten: list[str] = field(default_factory=list)  # documents this request already wrote once
    shrunk: list[str] = field(default_factory=list)  # documents with stored chunks they no longer have
    fingerprints: dict[str, str | None] = field(default_factory=dict)  # document -> its chunks' fingerprint
    refingerprint: list[tuple[str, str]] = field(
        default_factory=list
    )  # unchanged chunks of changed documents


def _same(stored: store.StoredChunk, chunk: Chunk) -> bool:
    """The same text and metadata, `_updated_at` aside (a chunk read without its metadata was made from what
    `chunk` was made from: the same)."""
    old, new = stored.metadata, chunk.metadata
    if old is None:
        return True
    if stored.content_hash != chunk.content_hash:
        return False
    if len(old) - ("_updated_at" in old) != len(new) - ("_updated_at" in new):
        return False
    return all(k == "_updated_at" or (k in old and old[k] == v) for k, v in new.items())


def _unchanged(stored: list[store.StoredChunk]) -> bool:
    """A document's stored chunks are all made from what is inserted now (read without their metadata: see
    `storage.chunks.chunks_of_documents`) and none is missing (their fingerprint counts them)."""
    fingerprint = stored[0].fingerprint
    return (
        fingerprint is not None
        and fingerprint.rpartition(":")[2] == str(len(stored))
        and all(c.metadata is None and c.fingerprint == fingerprint for c in stored)
    )


def _chunks(
    docs: Iterable[Document], config: ChunkingConfig, updated_at: str
) -> list[tuple[Document, Chunk]]:
    """The chunks of one document's columns, each with the document it is of; a chunk id made twice (MindsDB's
    JSON chunk ids name the JSON `content_column`, not the document's) is the last one made, as MindsDB's
    upsert keeps it."""
    made = {c.chunk_id: (doc, c) for doc in docs for c in chunk_document(doc, config, updated_at)}
    return list(made.values())


class ChunkContexts(Protocol):
    """Contextual chunking's LLM (`service.ingest.contexts`): each chunk's context, from its cache or asked."""

    async def add_contexts(self, pairs: list[tuple[Document, Chunk]]) -> None:
        """Rewrite each chunk's `content` (and `content_hash`) with its context within its document."""
        ...


class Ingestor:
    """Writes documents into one KB inside one transaction (`conn`)."""

    def __init__(
        self,
        conn: AsyncConnection,
        kb_id: int,
        table: str,
        embedder: Embedder,
        chunking: ChunkingConfig,
        on_batch: Callable[[IngestStats], Awaitable[None]] | None = None,
        *,
        skip_existing: bool = False,
        no_upsert: bool = False,
        dim: int | None = None,
        seen_in_memory: int = SEEN_IN_MEMORY,
        locked_documents: int = LOCKED_DOCUMENTS,
        contexts: ChunkContexts | None = None,
    ) -> None:
        """`dim`: the size of the table's vectors; embeddings of another size are refused. `seen_in_memory`:
        see `SeenDocuments`. `locked_documents`: see `LOCKED_DOCUMENTS`. `contexts`: the LLM of contextual
        chunking (required by it, unused otherwise)."""
        if (chunking.kind == CONTEXTUAL) != (contexts is not None):
            raise ValueError("contextual chunking, and only it, takes `contexts`")
        self.conn = conn
        self.kb_id = kb_id
        self.table = table
        self.embedder = embedder
        self.chunking = chunking
        self.seen = SeenDocuments(conn, seen_in_memory)  # documents already written by this request
        self.lock_budget = locked_documents  # per-document locks left; below 0, the whole KB is locked
        self.kb_shared_held = False  # the KB's lock, held shared by this transaction since a first batch
        self.stats = IngestStats()
        self.on_batch = on_batch
        self.skip_existing = skip_existing
        self.no_upsert = no_upsert
        self.skipped = 0  # documents left as stored (`skip_existing`)
        self.dim = dim
        self.contexts = contexts

    async def _plan(self, documents: list[Document]) -> _Plan:
        updated_at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        by_doc: dict[str, dict[str, Document]] = {}
        for doc in documents:  # the last occurrence of a (document, column) wins
            by_doc.setdefault(doc.doc_id, {})[doc.content_column] = doc
        doc_ids = sorted(by_doc)
        if self.lock_budget >= 0:
            self.lock_budget -= len(doc_ids)
            if self.lock_budget >= 0:
                await store.lock_documents(self.conn, self.kb_id, doc_ids, kb_shared_held=self.kb_shared_held)
                self.kb_shared_held = True
            else:
                await store.lock_all_documents(self.conn, self.kb_id)
        seen = await self.seen.among(doc_ids)
        digests = {d: source_fingerprint(by_doc[d].values(), self.chunking) for d in doc_ids}
        stored: dict[str, store.StoredChunk] = {}
        if not self.no_upsert:
            stored = {
                c.chunk_id: c
                for c in await store.chunks_of_documents(
                    self.conn, self.table, doc_ids, [digests[d] for d in doc_ids]
                )
            }
        if self.skip_existing:
            existing = {c.doc_id for c in stored.values()} - seen
            self.skipped += len(existing)
            doc_ids = [d for d in doc_ids if d not in existing]
            stored = {cid: c for cid, c in stored.items() if c.doc_id not in existing}
        stats = IngestStats(documents=len(doc_ids))
        keep: list[str] = []
        writes: list[Chunk] = []
        fresh: set[str] = set()
        fingerprints: dict[str, str | None] = {}
        refingerprint: list[tuple[str, str]] = []
        by_stored_doc: dict[str, list[store.StoredChunk]] = {}
        for c in stored.values():
            by_stored_doc.setdefault(c.doc_id, []).append(c)
        chunked: list[tuple[str, list[tuple[Document, Chunk]]]] = []
        for doc_id in doc_ids:
            olds = by_stored_doc.get(doc_id, [])
            if olds and doc_id not in seen and _unchanged(olds):  # not chunked again
                keep.extend(c.chunk_id for c in olds)
                stats.unchanged += len(olds)
                continue
            chunked.append((doc_id, _chunks(by_doc[doc_id].values(), self.chunking, updated_at)))
        if self.contexts is not None:
            await self.contexts.add_contexts([pair for _, pairs in chunked for pair in pairs])
        for doc_id, pairs in chunked:
            chunks = [chunk for _, chunk in pairs]
            rewrite = doc_id in seen
            olds = by_stored_doc.get(doc_id, [])
            digest = digests[doc_id]
            fingerprint = fingerprints[doc_id] = None if digest is None else f"{digest}:{len(chunks)}"
            same: list[str] = []
            for chunk in chunks:
                keep.append(chunk.chunk_id)
                previous = stored.get(chunk.chunk_id)
                if previous is not None and not rewrite and _same(previous, chunk):
                    stats.unchanged += 1
                    if previous.fingerprint != fingerprint:
                        same.append(chunk.chunk_id)
                else:
                    writes.append(chunk)
                    if previous is None and not rewrite and not self.no_upsert:
                        fresh.add(chunk.chunk_id)
            # unchanged chunks take the document's new fingerprint when it was written in part, or when theirs
            # is another (the same chunks from other settings); chunks stored before fingerprints, of a
            # document left as it is, keep none (compared chunk by chunk: no rewrite of a whole table)
            if fingerprint is not None and same:
                written = len(same) < len(chunks) or len(olds) > len(same)
                refingerprint.extend(
                    (cid, fingerprint) for cid in same if written or stored[cid].fingerprint is not None
                )
        stats.chunks = len(keep)
        kept = set(keep)
        gone = [c for cid, c in stored.items() if cid not in kept]
        stats.deleted = len(gone)
        vectors: dict[str, np.ndarray] = {}
        if not self.no_upsert:
            vectors = await store.embeddings_by_hash(
                self.conn, self.table, sorted({c.content_hash for c in writes})
            )
        plan = _Plan(doc_ids, keep, writes, fresh, vectors, stats=stats)
        plan.fingerprints, plan.refingerprint = fingerprints, refingerprint
        plan.rewritten = [d for d in doc_ids if d in seen]
        plan.shrunk = sorted({c.doc_id for c in gone})
        pending: dict[str, Chunk] = {}
        for chunk in writes:
            if chunk.content_hash not in vectors:
                pending.setdefault(chunk.content_hash, chunk)
        plan.to_embed = list(pending.values())
        stats.embedded = len(plan.to_embed)
        stats.reused_vectors = len(writes) - sum(1 for c in writes if c.content_hash in pending)
        await self.seen.add(doc_ids)
        return plan

    def _embed(self, plan: _Plan) -> list[asyncio.Task[dict[str, np.ndarray]]]:
        """The batch's new texts embedded in parts of `EMBED_PART`, requested at once: the write of a part
        starts as soon as its vectors are back, while the embedder works on the next ones."""
        return [
            asyncio.create_task(self._embed_part(plan.to_embed[i : i + EMBED_PART]))
            for i in range(0, len(plan.to_embed), EMBED_PART)
        ]

    async def _embed_part(self, part: list[Chunk]) -> dict[str, np.ndarray]:
        vectors = await self.embedder.embed_documents([c.content for c in part])
        if self.dim is not None and vectors.shape[1] != self.dim:
            raise UpstreamError(
                f"Embedding model {self.embedder.name!r} returned vectors of {vectors.shape[1]} dimensions, but "
                f"this knowledge base stores vectors of {self.dim} dimensions (the size given or known for "
                "the model). Nothing was inserted. Create the knowledge base with "
                f"'embedding_model.dimensions': {vectors.shape[1]}, or use a model that returns {self.dim}.",
                title="Embedding size mismatch",
            )
        return {c.content_hash: vectors[i] for i, c in enumerate(part)}

    async def _write(self, plan: _Plan, parts: list[asyncio.Task[dict[str, np.ndarray]]]) -> None:
        vectors = dict(plan.vectors)
        # the documents' locks are held since `_plan` read what they store: only those that lost chunks, and
        # those this request wrote before (their earlier chunks may postdate that read), can hold others
        replaced = sorted({*plan.rewritten, *plan.shrunk})
        if replaced:
            await store.delete_other_chunks(self.conn, self.table, replaced, plan.keep)
        await store.set_fingerprints(self.conn, self.table, plan.refingerprint)
        # chunks written with the part that embeds their text (those with stored vectors, with the first)
        part_of = {c.content_hash: i // EMBED_PART for i, c in enumerate(plan.to_embed)}
        groups: list[list[Chunk]] = [[] for _ in range(max(len(parts), 1))]
        for chunk in plan.writes:
            groups[part_of.get(chunk.content_hash, 0)].append(chunk)
        for i, group in enumerate(groups):
            if i < len(parts):
                vectors.update(await parts[i])
            rows = [
                ChunkWrite(
                    c.chunk_id,
                    c.doc_id,
                    c.content,
                    c.content_hash,
                    c.metadata,
                    vectors[c.content_hash],
                    plan.fingerprints.get(c.doc_id),
                )
                for c in group
            ]
            await store.copy_new_chunks(self.conn, self.table, [w for w in rows if w.chunk_id in plan.fresh])
            await store.upsert_chunks(
                self.conn, self.table, [w for w in rows if w.chunk_id not in plan.fresh]
            )
        plan.stats.written = len(plan.writes)
        self.stats.add(plan.stats)
        _count(plan.stats)
        if self.on_batch is not None:
            await self.on_batch(self.stats)

    async def run(self, batches: AsyncIterator[list[Document]]) -> IngestStats:
        pending: tuple[_Plan, list[asyncio.Task[dict[str, np.ndarray]]]] | None = None
        await store.plan_with_given_lists(self.conn)
        try:
            async for documents in batches:
                if not documents:
                    continue
                plan = await self._plan(documents)
                parts = self._embed(plan)
                if pending is not None:
                    await self._write(*pending)
                pending = (plan, parts)
            if pending is not None:
                await self._write(*pending)
                pending = None
        finally:
            abandoned: list[asyncio.Task[dict[str, np.ndarray]]] = pending[1] if pending is not None else []
            for part in abandoned:
                if part.done():
                    if not part.cancelled():
                        part.exception()  # mark a failure we are abandoning as observed
                else:
                    part.cancel()
        return self.stats
