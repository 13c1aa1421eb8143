"""Searching a knowledge base's chunks: the one search of the HTTP search endpoint, and of the KB SELECT
executor (`kb_select`) that the SQL endpoint and the agents' `kb_query_tool` share."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from psycopg.errors import UndefinedTable
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb import metrics
from agentkb.errors import NotFound
from agentkb.guarded_http import guarded_httpx_client
from agentkb.kb import rerank
from agentkb.kb.embedders.registry import EmbedderRegistry
from agentkb.kb.lexical import SYNC_BUILD_MAX_CHUNKS, LexicalIndexes
from agentkb.kb.search import (
    DEFAULT_LIMIT,
    MAX_CONTENT_LIMIT,
    Found,
    Hit,
    SearchOptions,
    bm25_ids,
    lexical_weight,
    search,
)
from agentkb.kb.vectors import Loaded, VectorSet, VectorSets
from agentkb.secrecy import SecretBox
from agentkb.service.catalog import kb_lookup
from agentkb.service.platform import access
from agentkb.sql.kbquery import KBQuery
from agentkb.storage import chunk_search, chunks
from agentkb.storage import knowledge_bases as repo
from agentkb.storage.db import Database
from agentkb.storage.knowledge_bases import KnowledgeBaseRow
from agentkb.storage.read_routing import ReadRouter
from agentkb.validation import check_storable

if TYPE_CHECKING:
    import httpx
    import numpy as np

# BM25 over an index of up to this many chunks ranks inline, on the event loop: it is quick enough there (its
# top k taken among the scoring chunks only: kb.lexical) that a hand-off to a thread costs concurrent searches
# more than it saves. A larger index ranks in a worker thread, beside the event loop.
INLINE_BM25_MAX_CHUNKS = 100_000
MAX_CACHED_KBS = 10_000  # KB rows kept per process (the cache starts over beyond this)
VECTOR_CACHE_BYTES = 128 * 1024**2  # the default of AGENTKB_VECTOR_CACHE_MB


def options_from_query(query: KBQuery) -> SearchOptions:
    """A SQL `SELECT … FROM <kb>`'s search, MindsDB's: `content = …` alone is a vector search (MindsDB's
    `hybrid_search_alpha` defaults to 1); `hybrid_search = true` fuses in BM25's ranking (alpha 0.5), as does
    `hybrid_search_alpha = a` (alpha a)."""
    options = SearchOptions(
        query=query.content,
        filters=query.filters,
        limit=query.limit,
        offset=query.offset or 0,
        relevance_threshold=query.relevance_threshold,
        hybrid=False,
    )
    if query.hybrid_search is not None:
        options = replace(options, hybrid=query.hybrid_search)
    if query.hybrid_search_alpha is not None:
        options = replace(options, hybrid=True, alpha=query.hybrid_search_alpha)
    if query.reranking is not None:
        options = replace(options, rerank=query.reranking)
    return options


def search_mode(kb: KnowledgeBaseRow, options: SearchOptions) -> str:
    """The metrics' `mode` label: metadata (no query text), vector or hybrid, `+rerank` when reranked."""
    if options.query is None:
        return "metadata"
    mode = "hybrid" if options.hybrid and options.alpha < 1.0 else "vector"
    return f"{mode}+rerank" if options.rerank and kb.reranking_model else mode


class KnowledgeBaseGone(NotFound):
    """The KB a cached row names was dropped (or dropped and created again) by some process."""


class SearchService:
    """Searches, with per-process caches that stay right whatever process writes: KB rows by name and their
    revealed embedding configurations, keyed by the KB's `updated_at`, which each search reads back in its
    one statement; a search that finds another version reloads the row and runs again, one that finds the
    KB gone looks its name up again. BM25 indexes are keyed by the row's `content_version` (moved with
    `updated_at` by every write of chunks, and only then), so they outlive a change of settings."""

    def __init__(
        self,
        db: Database,
        embedders: EmbedderRegistry,
        *,
        box: SecretBox | None = None,
        reads: ReadRouter | None = None,
        vector_cache_bytes: int = VECTOR_CACHE_BYTES,
    ) -> None:
        self.db = db
        # the chunks are read through it: on a replica when AGENTKB_DATABASE_READ_URL is set and it is current
        self.reads = reads or ReadRouter(db, None)
        self.embedders = embedders
        self.box = box or SecretBox.from_environment()
        self.lexical = LexicalIndexes()
        self.vectors = VectorSets(vector_cache_bytes)
        self._http: httpx.AsyncClient | None = None
        self._by_name: dict[tuple[str, str], KnowledgeBaseRow] = {}
        self._by_id: dict[int, KnowledgeBaseRow] = {}
        self._configs: dict[int, tuple[datetime, dict[str, Any]]] = {}

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = guarded_httpx_client()  # the reranker: only to allowed addresses
        return self._http

    async def aclose(self) -> None:
        await self.vectors.aclose()
        if self._http is not None:
            await self._http.aclose()

    def _remember(self, kb: KnowledgeBaseRow, key: tuple[str, str] | None = None) -> None:
        if len(self._by_name) > MAX_CACHED_KBS:
            self._by_name.clear()
            self._by_id.clear()
        if key is not None:
            self._by_name[key] = kb
        self._by_id[kb.id] = kb

    def _forget(self, kb_id: int) -> None:
        self._by_id.pop(kb_id, None)
        self._configs.pop(kb_id, None)
        self.lexical.forget(kb_id)
        self.vectors.forget(kb_id)
        for key in [k for k, v in self._by_name.items() if v.id == kb_id]:
            del self._by_name[key]

    def latest(self, kb: KnowledgeBaseRow) -> KnowledgeBaseRow:
        """The newest row of `kb` this process has seen (a search refreshes it when the KB changed)."""
        cached = self._by_id.get(kb.id)
        return cached if cached is not None and cached.updated_at != kb.updated_at else kb

    async def knowledge_base(self, project_name: str, kb_name: str) -> KnowledgeBaseRow:
        """The KB's row, read now."""
        kb = await kb_lookup.read(self.db, project_name, kb_name)
        self._remember(kb, (project_name, kb_name))
        return kb

    def cached(self, project_name: str, kb_name: str) -> KnowledgeBaseRow | None:
        """The KB's row as this process last saw it (no round trip); a search validates it."""
        return self._by_name.get((project_name, kb_name))

    async def cached_knowledge_base(self, project_name: str, kb_name: str) -> KnowledgeBaseRow:
        return self.cached(project_name, kb_name) or await self.knowledge_base(project_name, kb_name)

    async def search(self, project_name: str, kb_name: str, options: SearchOptions) -> list[Hit]:
        kb = await self.cached_knowledge_base(project_name, kb_name)
        try:
            return await self.search_kb(kb, options)
        except KnowledgeBaseGone:  # dropped (perhaps created again) by another process
            kb = await self.knowledge_base(project_name, kb_name)
            return await self.search_kb(kb, options)

    async def search_kb(self, kb: KnowledgeBaseRow, options: SearchOptions) -> list[Hit]:
        access.require_project(kb.project_name)
        with metrics.timed(metrics.search_duration, None, search_mode(kb, options)):
            return await self._search_kb(kb, options)

    async def _search_kb(self, kb: KnowledgeBaseRow, options: SearchOptions) -> list[Hit]:
        check_storable(options.query, "query")  # the text reaches PostgreSQL: no NUL characters
        for f in options.filters:
            check_storable(f.key, "filters")
            check_storable(f.value, f"filters.{f.key}")
        reranker = kb.reranking_model if options.rerank and options.query is not None else None
        if reranker:
            limit = min(options.limit if options.limit is not None else DEFAULT_LIMIT, MAX_CONTENT_LIMIT)
            wide = replace(options, limit=rerank.candidates_for(limit), relevance_threshold=None)
            kb, hits = await self._validated(kb, wide)
            if not kb.reranking_model:  # removed since this process cached the KB's row: a plain search
                return (await self._validated(kb, options))[1]
            model = self.box.reveal(kb.reranking_model, f"knowledge base {kb.name} reranking_model")
            return await rerank.rerank(
                self.http, model, options.query or "", hits, options.relevance_threshold, limit
            )
        fresh, hits = await self._validated(kb, options)
        if fresh is not kb and fresh.reranking_model and options.rerank and options.query is not None:
            return await self._search_kb(fresh, options)  # a reranker set since this process cached the row
        return hits

    async def _validated(
        self, kb: KnowledgeBaseRow, options: SearchOptions
    ) -> tuple[KnowledgeBaseRow, list[Hit]]:
        """The hits from the KB as it is now: run again on a fresh row if the search found another version."""
        vector, ids = await self._inputs(kb, options)
        version, hits = await self._search(kb, options, vector, ids)
        if version == kb.updated_at:
            return kb, hits
        fresh = await self._reload(kb)
        same_vector = (fresh.embedding_model, fresh.storage_table, fresh.vector_dim) == (
            kb.embedding_model,
            kb.storage_table,
            kb.vector_dim,
        )
        if same_vector and ids is None and fresh.updated_at == version:
            return fresh, hits  # these hits came from the current rows already
        if same_vector:
            ids = await self._lexical_ids(fresh, options)
        else:
            vector, ids = await self._inputs(fresh, options)
        return fresh, (await self._search(fresh, options, vector, ids))[1]

    async def _inputs(
        self, kb: KnowledgeBaseRow, options: SearchOptions
    ) -> tuple[np.ndarray | None, list[str] | None]:
        """The query's vector and BM25's candidates, the embedding running while BM25 ranks."""
        if options.query is None or lexical_weight(options) <= 0:
            return await self._embed(kb, options), None
        vector, ids = await asyncio.gather(self._embed(kb, options), self._lexical_ids(kb, options))
        return vector, ids

    async def _lexical_ids(self, kb: KnowledgeBaseRow, options: SearchOptions) -> list[str] | None:
        if options.query is None or lexical_weight(options) <= 0:
            return None
        # keyed by the chunks' version, not the row's: a change of settings keeps a large KB's index
        index = await self.lexical.get(
            kb.id, kb.content_version, lambda: self._chunk_count(kb), lambda: self._texts(kb)
        )
        if index is not None and len(index.chunk_ids) > INLINE_BM25_MAX_CHUNKS:
            return await asyncio.to_thread(bm25_ids, index, options)
        return bm25_ids(index, options)

    async def _reload(self, kb: KnowledgeBaseRow) -> KnowledgeBaseRow:
        async with self.db.read() as conn:
            fresh = await repo.get_by_id(conn, kb.id)
        if fresh is None:
            raise self._gone(kb)
        for key, row in list(self._by_name.items()):
            if row.id == kb.id:
                self._by_name[key] = fresh
        self._by_id[kb.id] = fresh
        return fresh

    def embedding_config(self, kb: KnowledgeBaseRow) -> dict[str, Any]:
        """The KB's embedding configuration, revealed once per KB version."""
        cached = self._configs.get(kb.id)
        if cached is not None and cached[0] == kb.updated_at:
            return cached[1]
        config: dict[str, Any] = self.box.reveal(
            kb.embedding_model, f"knowledge base {kb.name} embedding_model"
        )
        self._configs[kb.id] = (kb.updated_at, config)
        return config

    async def _embed(self, kb: KnowledgeBaseRow, options: SearchOptions) -> np.ndarray | None:
        if options.query is None:
            return None
        return await self.embedders.get(self.embedding_config(kb)).embed_query(options.query)

    async def _search(
        self,
        kb: KnowledgeBaseRow,
        options: SearchOptions,
        vector: np.ndarray | None,
        ids: list[str] | None,
    ) -> tuple[datetime, list[Hit]]:
        """(the KB's version, hits): one round trip, two when the KB's vectors held here turn out to be an
        older version's (a write since this process last saw the KB)."""
        held = self._vectors(kb) if vector is not None and not options.filters else None
        found = await self._run(kb, options, vector, ids, held)
        if found.in_process and found.version != kb.updated_at:
            metrics.search_in_process.labels("stale").inc()
            found = await self._run(kb, options, vector, ids, None)
        elif found.in_process:
            metrics.search_in_process.labels("answered").inc()
        elif held is not None:  # the table was indexed since the load: the index answers from now on
            metrics.search_in_process.labels("indexed").inc()
            self.vectors.decline(kb.id, held.version)
        if found.version is None:  # the KB's row is gone (a missing chunk table raised in `_run`)
            raise self._gone(kb)
        return found.version, found.hits

    def _vectors(self, kb: KnowledgeBaseRow) -> VectorSet | None:
        return self.vectors.get(kb.id, kb.updated_at, lambda: self._load_vectors(kb))

    async def _load_vectors(self, kb: KnowledgeBaseRow) -> Loaded:
        async def load(conn: AsyncConnection) -> Loaded:
            max_rows = self.vectors.max_rows(kb.vector_dim)
            return Loaded(
                *await chunk_search.all_vectors(conn, kb.id, kb.storage_table, kb.vector_dim, max_rows)
            )

        try:  # from where the searches read, in one snapshot with the version
            return await self.reads.run(load)
        except ProgrammingError as exc:
            if isinstance(exc.orig, UndefinedTable):
                return Loaded(None, None, None)
            raise

    async def _run(
        self,
        kb: KnowledgeBaseRow,
        options: SearchOptions,
        vector: np.ndarray | None,
        ids: list[str] | None,
        held: VectorSet | None,
    ) -> Found:
        async def run(conn: AsyncConnection) -> Found:
            return await search(
                conn,
                kb.id,
                kb.storage_table,
                kb.vector_dim,
                options,
                vector,
                ids,
                ef_search=kb.params.get("ef_search"),
                vectors=held,
            )

        # on the replica when there is one (the BM25 texts and KB rows come from the primary)
        try:
            return await self.reads.run(run)
        except ProgrammingError as exc:
            if isinstance(exc.orig, UndefinedTable):
                raise self._gone(kb) from exc
            raise

    async def _chunk_count(self, kb: KnowledgeBaseRow) -> int:
        """The KB's chunks, counted only as far as BM25 needs to know whether its first build waits."""
        async with self._chunk_table(kb, self.db) as conn:
            return await chunks.count_up_to(conn, kb.storage_table, SYNC_BUILD_MAX_CHUNKS + 1)

    async def _texts(self, kb: KnowledgeBaseRow) -> tuple[list[str], list[str]]:
        async with self._chunk_table(kb, self.db) as conn:
            return await chunk_search.all_texts(conn, kb.storage_table)

    @asynccontextmanager
    async def _chunk_table(self, kb: KnowledgeBaseRow, db: Database) -> AsyncIterator[AsyncConnection]:
        """A read of `kb`'s chunk table on `db`; a missing table is `KnowledgeBaseGone` (`_gone`)."""
        try:
            async with db.read() as conn:
                yield conn
        except ProgrammingError as exc:
            if isinstance(exc.orig, UndefinedTable):
                raise self._gone(kb) from exc
            raise

    def _gone(self, kb: KnowledgeBaseRow) -> KnowledgeBaseGone:
        """A missing chunk table: the cached row's KB was dropped (perhaps created again) by some process."""
        self._forget(kb.id)
        return KnowledgeBaseGone(
            f"Knowledge Base with name {kb.name} does not exist", title="Knowledge Base not found"
        )
