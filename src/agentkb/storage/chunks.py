"""A knowledge base's chunk table: DDL (vectors: pgvector HNSW, cosine, see `vector_index`; no full-text
column: the lexical side of hybrid search is BM25 in each process, `kb.lexical`) and the write side. New
chunks are written with binary `COPY` (pgvector's binary format); chunks that replace stored ones are
upserted. Either lands above the HNSW index's watermark (`seq`).

Each chunk written by an insert carries its document's fingerprint (`doc_fingerprint`, `kb.chunking.
source_fingerprint` and the document's chunk count, `<digest>:<n>`): an insert of the same document finds it
unchanged from that alone, without chunking it again or reading its chunks' metadata back. A chunk written
otherwise (a single chunk's update, a restored export, a chunk stored before fingerprints) has none."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from pgvector import Vector
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.storage import vector_index
from agentkb.storage.db import TextArray, fetch_tuples
from agentkb.storage.vector_index import MAX_VECTOR_INDEX_DIM, distance_ops, vector_expr

if TYPE_CHECKING:
    import numpy as np

__all__ = ["MAX_VECTOR_INDEX_DIM", "distance_ops", "vector_expr"]
MAX_DIM = 4000  # pgvector indexes `halfvec` up to 4,000 dimensions
_COPY_COLUMNS = "chunk_id, doc_id, content, content_hash, metadata, embedding, doc_fingerprint"
# PostgreSQL's binary COPY format, written here whole (psycopg's row by row formatting was most of the
# Python work of an insert's write): signature, flags, header extension; then per row its field count and
# each field's length and bytes (-1: NULL); then -1
_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" * 2
_COPY_TRAILER = b"\xff\xff"
_COPY_NULL = b"\xff\xff\xff\xff"
_COPY_FIELDS = struct.pack("!h", 7)
_COPY_FLUSH = 1 << 20  # bytes sent to the server at a time
_length = struct.Struct("!i").pack
# A chunk's row is left whole up to this size (PostgreSQL's largest `toast_tuple_target`, a page less its
# header). With the default (about 2 kB), a typical chunk row is just over it: its content would be
# compressed with pglz at each write (prose rarely shrinks by the quarter pglz asks for) and moved to the
# TOAST table (a second row and index entry), and a wide vector compressed too, in vain; so writes cost less
# and a hit's content is read without a TOAST look-up. The cost, fewer rows a page, weighs little: unindexed
# tables' vectors are ranked in the process (`kb.vectors`). Larger rows are TOASTed as usual.
ROW_TOAST_TARGET = 8160
_vector_head = struct.Struct("!iHH").pack  # the field's length, then pgvector's (dimensions, unused)


def table_name(kb_id: int) -> str:
    return f"kb_chunks_{kb_id}"


async def create_chunk_table(conn: AsyncConnection, table: str, dim: int) -> None:
    if not 0 < dim <= MAX_DIM:
        raise ValueError(f"vector dimension {dim} is outside 1..{MAX_DIM}")
    for statement in (
        f"""CREATE TABLE {table} (
            chunk_id text PRIMARY KEY,
            doc_id text NOT NULL,
            content text NOT NULL,
            content_hash text NOT NULL,
            metadata jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            embedding vector({dim}) NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now(),
            seq bigserial NOT NULL,
            doc_fingerprint text
        ) WITH (toast_tuple_target = {ROW_TOAST_TARGET})""",
        # the vector stays in the row (pgvector's type is stored out of line by default): an exact scan of
        # the delta and each hit's distance then read no TOAST pages; a vector too large for the page still
        # moves out of line
        f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE MAIN",
        vector_index.hnsw_sql(table, dim, 0),
        f"CREATE INDEX {table}_seq ON {table} (seq)",
        f"CREATE INDEX {table}_doc ON {table} (doc_id)",
        f"CREATE INDEX {table}_hash ON {table} (content_hash)",
        # no index on `metadata`: filters compare `metadata ->> key` (storage.chunk_filters), which no GIN
        # index serves (a jsonb_path_ops index answers only `@>`, never asked), and every write would pay to
        # maintain it
    ):
        await conn.execute(text(statement))
    await vector_index.forget_table(conn, table)


async def rebuild_vector_index(
    conn: AsyncConnection, table: str, dim: int, options: Mapping[str, int] | None
) -> None:
    """`CREATE INDEX ON KNOWLEDGE_BASE`: build the HNSW index again over every row (delta included), with
    new parameters when `options` are given, in the caller's transaction. The table's searches and writes
    wait meanwhile. The caller holds `merge_lock(table)` (on another connection) until it commits."""
    await vector_index.rebuild(conn, table, dim, options)


merge_lock = vector_index.merge_lock


async def drop_chunk_table(conn: AsyncConnection, table: str) -> None:
    await conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
    await vector_index.forget_table(conn, table)


# not frozen, as `kb.documents.Document` says why
@dataclass(slots=True)
class StoredChunk:
    chunk_id: str
    doc_id: str
    content_hash: str
    fingerprint: str | None  # its document's, when it was written (`<digest>:<chunks>`)
    metadata: dict[str, Any] | None  # None: not read, as its fingerprint's digest is the one asked about


# not frozen, as `kb.documents.Document` says why
@dataclass(slots=True)
class ChunkWrite:
    chunk_id: str
    doc_id: str
    content: str
    content_hash: str
    metadata: dict[str, Any]
    embedding: np.ndarray
    fingerprint: str | None = None  # its document's (`StoredChunk.fingerprint`)


_GIVEN_LISTS = text(
    "SELECT set_config('plan_cache_mode', 'force_custom_plan', true), set_config('enable_seqscan', 'off', true)"
)


async def plan_with_given_lists(conn: AsyncConnection) -> None:
    """For the rest of the transaction, PostgreSQL plans each statement for the parameters it runs with. A batch
    write's statements bind lists of ids (one to thousands) that decide the plan: psycopg prepares a statement
    run often, and after five runs PostgreSQL may keep one generic plan, made for a list of unknown length,
    which can be orders of magnitude slower than a plan made for the list at hand (a batch's look-up of its
    documents' stored chunks, for one). Planning each statement is cheap next to that, once per batch.

    And by index: each of these statements finds its rows by an indexed key (`doc_id`, `chunk_id`,
    `content_hash`, the seen documents' ids), but the rows written by the transaction itself have no
    statistics (autovacuum cannot see them; a temporary table never gets any), and without them PostgreSQL takes
    `doc_id = ANY(<256 ids>)` to match most of the table and scans all of it. One statement inserting a million
    rows is one transaction: without this, every batch would scan the whole chunk table, and the insert would
    slow down as the table grew."""
    await conn.execute(_GIVEN_LISTS)  # both `SET LOCAL`s in one round trip


async def chunks_of_documents(
    conn: AsyncConnection, table: str, doc_ids: list[str], digests: list[str | None] | None = None
) -> list[StoredChunk]:
    """The stored chunks of `doc_ids`. `digests` (one per document, or None): a chunk whose fingerprint has
    its document's digest comes without its metadata (what it was made from is what the caller has)."""
    if digests is None:
        digests = [None] * len(doc_ids)
    rows = await fetch_tuples(  # one row per stored chunk (1,000 and more): tuples, not SQLAlchemy's rows
        conn,
        "SELECT c.chunk_id, c.doc_id, c.content_hash, c.doc_fingerprint, "
        "CASE WHEN split_part(c.doc_fingerprint, ':', 1) = f.digest THEN NULL ELSE c.metadata END "
        f"FROM {table} AS c JOIN unnest(CAST(:ids AS text[]), CAST(:digests AS text[])) AS f(doc_id, digest) "
        "ON c.doc_id = f.doc_id WHERE c.doc_id = ANY(:ids)",
        {"ids": TextArray(doc_ids), "digests": TextArray(digests)},
    )
    return [StoredChunk(*r) for r in rows]  # the columns in the fields' order


async def set_fingerprints(conn: AsyncConnection, table: str, fingerprints: list[tuple[str, str]]) -> None:
    """(chunk id, fingerprint) pairs: unchanged chunks of a document that was rewritten in part take its new
    fingerprint (their rows otherwise stay as they are, `seq` included)."""
    if not fingerprints:
        return
    await conn.execute(
        text(
            f"UPDATE {table} AS c SET doc_fingerprint = f.fp FROM "
            "unnest(CAST(:ids AS text[]), CAST(:fps AS text[])) AS f(chunk_id, fp) WHERE c.chunk_id = f.chunk_id"
        ),
        {"ids": TextArray(cid for cid, _ in fingerprints), "fps": TextArray(fp for _, fp in fingerprints)},
    )


async def embeddings_by_hash(conn: AsyncConnection, table: str, hashes: list[str]) -> dict[str, np.ndarray]:
    """Stored vectors of chunks with these content hashes (any document): reused instead of re-embedding."""
    if not hashes:
        return {}
    rows = await conn.execute(
        text(
            f"SELECT DISTINCT ON (content_hash) content_hash, embedding FROM {table} "
            "WHERE content_hash = ANY(:hashes)"
        ),
        {"hashes": TextArray(hashes)},
    )
    return {r.content_hash: r.embedding for r in rows}


def _kb_lock_key(kb_id: int) -> str:
    return f"kb-documents:{kb_id}"


async def lock_documents(
    conn: AsyncConnection, kb_id: int, doc_ids: list[str], *, kb_shared_held: bool = False
) -> None:
    """Serialise concurrent inserts of the same documents (transaction-scoped advisory locks, in order),
    under the knowledge base's lock held shared (see `lock_all_documents`), which is taken first unless
    `kb_shared_held` says an earlier call of this transaction took it."""
    if not kb_shared_held:
        await conn.execute(
            text("SELECT pg_advisory_xact_lock_shared(hashtextextended(:key, 0))"),
            {"key": _kb_lock_key(kb_id)},
        )
    await conn.execute(  # one row back, not one per document (the locks are taken above the sort, in order)
        text(
            "SELECT count(*) FROM (SELECT pg_advisory_xact_lock(:kb, hashtext(d)) "
            "FROM unnest(CAST(:ids AS text[])) AS d ORDER BY d) AS locked"
        ),
        {"kb": kb_id, "ids": TextArray(doc_ids)},
    )


async def lock_all_documents(conn: AsyncConnection, kb_id: int) -> None:
    """Every document of the knowledge base at once: its lock held exclusively (waits for the inserts that
    hold it shared). For an insert of more documents than PostgreSQL's lock table could hold one by one
    (`max_locks_per_transaction`); concurrent inserts into the knowledge base wait for it to commit."""
    await conn.execute(
        text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": _kb_lock_key(kb_id)}
    )


SEEN_TABLE = "agentkb_seen_documents"  # a temporary table: the ids an insert has written, past its memory
RETURNED_TABLE = "agentkb_returned_documents"  # the ids a mirrored insert's SELECT returned, past its memory


async def create_seen_documents(conn: AsyncConnection, doc_ids: list[str], table: str = SEEN_TABLE) -> None:
    """A temporary table `table` of document ids, dropped when the caller's transaction ends, holding `doc_ids`."""
    await conn.execute(text(f"CREATE TEMPORARY TABLE {table} (doc_id text PRIMARY KEY) ON COMMIT DROP"))
    await add_seen_documents(conn, doc_ids, table)


async def add_seen_documents(conn: AsyncConnection, doc_ids: list[str], table: str = SEEN_TABLE) -> None:
    if doc_ids:
        await conn.execute(
            text(f"INSERT INTO {table} (doc_id) SELECT unnest(CAST(:ids AS text[])) ON CONFLICT DO NOTHING"),
            {"ids": TextArray(doc_ids)},
        )


async def seen_documents_among(
    conn: AsyncConnection, doc_ids: list[str], table: str = SEEN_TABLE
) -> set[str]:
    """Those of `doc_ids` that the temporary table holds."""
    rows = await conn.execute(
        text(f"SELECT doc_id FROM {table} WHERE doc_id = ANY(:ids)"), {"ids": TextArray(doc_ids)}
    )
    return {r.doc_id for r in rows}


async def _counted_delete(conn: AsyncConnection, delete: str, params: dict[str, Any]) -> tuple[int, int]:
    """Run `delete` (a DELETE ... RETURNING doc_id); (documents, chunks) deleted, counted in PostgreSQL."""
    row = (
        await conn.execute(
            text(
                f"WITH gone AS ({delete}) SELECT count(DISTINCT doc_id) AS docs, count(*) AS chunks FROM gone"
            ),
            params,
        )
    ).one()
    return int(row.docs), int(row.chunks)


async def delete_documents_except(
    conn: AsyncConnection, table: str, keep: list[str] | None, keep_table: str | None = None
) -> tuple[int, int]:
    """A mirrored insert's end: delete every document whose id is neither in `keep` nor in the temporary table
    `keep_table`; (documents, chunks) deleted. One anti-join over the table, read sequentially (as the insert's
    transaction turned sequential scans off)."""
    await conn.execute(text("SELECT set_config('enable_seqscan', 'on', true)"))
    kept = "EXISTS (SELECT 1 FROM unnest(CAST(:ids AS text[])) AS k(doc_id) WHERE k.doc_id = c.doc_id)"
    if keep_table is not None:
        kept += f" OR EXISTS (SELECT 1 FROM {keep_table} AS s WHERE s.doc_id = c.doc_id)"
    return await _counted_delete(
        conn,
        f"DELETE FROM {table} AS c WHERE NOT ({kept}) RETURNING c.doc_id",
        {"ids": TextArray(keep or [])},
    )


async def delete_documents(conn: AsyncConnection, table: str, doc_ids: list[str]) -> tuple[int, int]:
    """Delete whole documents by id; (documents, chunks) deleted."""
    if not doc_ids:
        return 0, 0
    return await _counted_delete(
        conn, f"DELETE FROM {table} WHERE doc_id = ANY(:ids) RETURNING doc_id", {"ids": TextArray(doc_ids)}
    )


async def get_chunk(conn: AsyncConnection, table: str, chunk_id: str) -> ChunkWrite | None:
    row = (
        await conn.execute(
            text(
                f"SELECT chunk_id, doc_id, content, content_hash, metadata, embedding FROM {table} "
                "WHERE chunk_id = :id"
            ),
            {"id": chunk_id},
        )
    ).first()
    if row is None:
        return None
    return ChunkWrite(row.chunk_id, row.doc_id, row.content, row.content_hash, row.metadata, row.embedding)


async def has_chunks(conn: AsyncConnection, table: str) -> bool:
    return bool(await conn.scalar(text(f"SELECT EXISTS (SELECT 1 FROM {table})")))


async def delete_other_chunks(conn: AsyncConnection, table: str, doc_ids: list[str], keep: list[str]) -> None:
    """Drop the chunks of `doc_ids` that are not in `keep` (a document that got shorter)."""
    await conn.execute(
        text(f"DELETE FROM {table} WHERE doc_id = ANY(:docs) AND NOT (chunk_id = ANY(:keep))"),
        {"docs": TextArray(doc_ids), "keep": TextArray(keep)},
    )


def _text_field(value: str) -> bytes:
    data = value.encode()
    return _length(len(data)) + data


def _copy_row(w: ChunkWrite) -> bytes:
    """One chunk in binary COPY format: text fields as UTF-8, jsonb as version 1 and its text, the vector as
    pgvector's binary (dimensions, unused, big-endian float4s)."""
    import numpy as np

    metadata = orjson.dumps(w.metadata)
    embedding = w.embedding.to_numpy() if isinstance(w.embedding, Vector) else w.embedding  # a stored one
    vector = np.ascontiguousarray(embedding, dtype=">f4").reshape(-1)
    return b"".join(
        (
            _COPY_FIELDS,
            _text_field(w.chunk_id),
            _text_field(w.doc_id),
            _text_field(w.content),
            _text_field(w.content_hash),
            _length(len(metadata) + 1),
            b"\x01",
            metadata,
            _vector_head(4 + 4 * len(vector), len(vector), 0),
            vector.tobytes(),
            _COPY_NULL if w.fingerprint is None else _text_field(w.fingerprint),
        )
    )


async def copy_new_chunks(conn: AsyncConnection, table: str, writes: list[ChunkWrite]) -> None:
    """Chunks whose ids are not stored (the caller holds their documents' locks): one binary `COPY`."""
    if not writes:
        return
    raw = (await conn.get_raw_connection()).driver_connection
    assert raw is not None  # a checked-out connection
    async with (
        raw.cursor() as cursor,
        cursor.copy(f"COPY {table} ({_COPY_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy,
    ):
        buffer = bytearray(_COPY_SIGNATURE)
        for w in writes:
            buffer += _copy_row(w)
            if len(buffer) >= _COPY_FLUSH:
                await copy.write(bytes(buffer))
                buffer.clear()
        buffer += _COPY_TRAILER
        await copy.write(bytes(buffer))


async def upsert_chunks(conn: AsyncConnection, table: str, writes: list[ChunkWrite]) -> None:
    """Insert or replace chunks by id; a replaced one takes a new `seq` (it leaves the HNSW index)."""
    if not writes:
        return
    await conn.execute(
        text(
            f"INSERT INTO {table} (chunk_id, doc_id, content, content_hash, metadata, embedding, "
            "doc_fingerprint, updated_at) VALUES (:chunk_id, :doc_id, :content, :content_hash, "
            "CAST(:metadata AS jsonb), :embedding, :fingerprint, now()) "
            "ON CONFLICT (chunk_id) DO UPDATE SET doc_id = EXCLUDED.doc_id, content = EXCLUDED.content, "
            "content_hash = EXCLUDED.content_hash, metadata = EXCLUDED.metadata, "
            "embedding = EXCLUDED.embedding, doc_fingerprint = EXCLUDED.doc_fingerprint, updated_at = now(), "
            "seq = EXCLUDED.seq"
        ),
        [
            {
                "chunk_id": w.chunk_id,
                "doc_id": w.doc_id,
                "content": w.content,
                "content_hash": w.content_hash,
                "metadata": orjson.dumps(w.metadata).decode(),
                "embedding": w.embedding,
                "fingerprint": w.fingerprint,
            }
            for w in writes
        ],
    )


async def count_up_to(conn: AsyncConnection, table: str, limit: int) -> int:
    """The table's chunks, counted up to `limit` (a larger table answers `limit`): reads at most `limit` rows,
    where `counts` reads them all."""
    row = (
        await conn.execute(
            text(f"SELECT count(*) FROM (SELECT 1 FROM {table} LIMIT :limit) o"), {"limit": limit}
        )
    ).one()
    return int(row[0])


async def counts(conn: AsyncConnection, table: str) -> tuple[int, int]:
    """(documents, chunks)."""
    row = (
        await conn.execute(text(f"SELECT count(DISTINCT doc_id) AS docs, count(*) AS chunks FROM {table}"))
    ).one()
    return int(row.docs), int(row.chunks)
