"""Searching a knowledge base's chunks: one executor for the HTTP search endpoint, the SQL
endpoint and the agent's `kb_query_tool`."""

from __future__ import annotations

from dataclasses import replace

import httpx

from agentkb import metrics
from agentkb.errors import kb_not_found
from agentkb.kb import rerank
from agentkb.kb.embedders.registry import EmbedderRegistry
from agentkb.kb.lexical import LexicalIndexes
from agentkb.kb.search import DEFAULT_LIMIT, MAX_CONTENT_LIMIT, Hit, SearchOptions, search
from agentkb.secrecy import SecretBox
from agentkb.service import projects
from agentkb.sql.kbquery import KBQuery
from agentkb.storage import chunk_search, chunks
from agentkb.storage import knowledge_bases as repo
from agentkb.storage.db import Database
from agentkb.storage.knowledge_bases import KnowledgeBaseRow
from agentkb.validation import check_storable, is_identifier


def options_from_query(query: KBQuery) -> SearchOptions:
    options = SearchOptions(
        query=query.content,
        filters=query.filters,
        limit=query.limit,
        offset=query.offset or 0,
        relevance_threshold=query.relevance_threshold,
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


class SearchService:
    def __init__(
        self,
        db: Database,
        embedders: EmbedderRegistry,
        *,
        box: SecretBox | None = None,
        read_db: Database | None = None,
    ) -> None:
        self.db = db
        self.read_db = read_db or db  # the chunks are read here: a replica when AGENTKB_DATABASE_READ_URL
        self.embedders = embedders
        self.box = box or SecretBox.from_environment()
        self.lexical = LexicalIndexes()
        self._http: httpx.AsyncClient | None = None

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient()
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()

    async def knowledge_base(self, project_name: str, kb_name: str) -> KnowledgeBaseRow:
        async with self.db.connect() as conn:
            kb = (
                await repo.get_in_project(conn, project_name.lower(), kb_name)
                if is_identifier(kb_name)
                else None
            )
            if kb is None:
                await projects.resolve(
                    conn, project_name
                )  # 404 for the project first, if that is what is missing
        if kb is None:
            raise kb_not_found(kb_name)
        return kb

    async def search(self, project_name: str, kb_name: str, options: SearchOptions) -> list[Hit]:
        kb = await self.knowledge_base(project_name, kb_name)
        return await self.search_kb(kb, options)

    async def search_kb(self, kb: KnowledgeBaseRow, options: SearchOptions) -> list[Hit]:
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
            hits = await self._search(kb, wide)
            model = self.box.reveal(reranker, f"knowledge base {kb.name} reranking_model")
            return await rerank.rerank(
                self.http, model, options.query or "", hits, options.relevance_threshold, limit
            )
        return await self._search(kb, options)

    async def _search(self, kb: KnowledgeBaseRow, options: SearchOptions) -> list[Hit]:
        vector = None
        if options.query is not None:
            config = self.box.reveal(kb.embedding_model, f"knowledge base {kb.name} embedding_model")
            vector = await self.embedders.get(config).embed_query(options.query)
        lexical = None
        if options.query is not None and options.hybrid and options.alpha < 1.0:
            lexical = await self.lexical.get(
                kb.id, kb.updated_at, lambda: self._chunk_count(kb), lambda: self._texts(kb)
            )
        async with self.read_db.connect() as conn:
            return await search(conn, kb.storage_table, kb.vector_dim, options, vector, lexical)

    async def _chunk_count(self, kb: KnowledgeBaseRow) -> int:
        async with self.read_db.connect() as conn:
            return (await chunks.counts(conn, kb.storage_table))[1]

    async def _texts(self, kb: KnowledgeBaseRow) -> tuple[list[str], list[str]]:
        async with self.read_db.connect() as conn:
            return await chunk_search.all_texts(conn, kb.storage_table)

    async def query(self, query: KBQuery, default_project: str) -> tuple[KnowledgeBaseRow, list[Hit]]:
        kb = await self.knowledge_base(query.project or default_project, query.kb)
        return kb, await self.search_kb(kb, options_from_query(query))
