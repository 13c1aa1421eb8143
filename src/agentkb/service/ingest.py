"""Inserting into a knowledge base (spec 4.5): settings from `params`, then rows → files → urls → query,
all in one transaction: an insert is applied whole or not at all."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.errors import BadRequest, NotFound, kb_not_found
from agentkb.ingest.pipeline import Ingestor, IngestStats
from agentkb.kb.chunking import chunking_config
from agentkb.kb.documents import ColumnSpec, Document, row_documents
from agentkb.kb.embedders import config as embedding_config
from agentkb.kb.embedders.registry import EmbedderRegistry
from agentkb.service import projects
from agentkb.service.data_sources import DataSourceService
from agentkb.service.validation import check_dict, check_storable, check_str_list, is_identifier
from agentkb.storage import chunks
from agentkb.storage import knowledge_bases as repo
from agentkb.storage.db import Database
from agentkb.storage.knowledge_bases import KnowledgeBaseRow

log = logging.getLogger(__name__)
BATCH_ROWS = 256
SETTING_KEYS = ("id_column", "metadata_columns", "content_columns", "embedding_model", "reranking_model")


@dataclass(frozen=True, slots=True)
class InsertInput:
    rows: Any = None
    query: Any = None
    files: Any = None
    urls: Any = None
    limit: Any = None
    crawl_depth: Any = None
    filters: Any = None
    params: Any = None
    preprocessing: Any = None


def column_spec(kb: KnowledgeBaseRow) -> ColumnSpec:
    return ColumnSpec(
        kb.id_column,
        tuple(kb.content_columns) if kb.content_columns else None,
        tuple(kb.metadata_columns) if kb.metadata_columns else None,
    )


async def _row_batches(rows: list[dict[str, Any]], spec: ColumnSpec) -> AsyncIterator[list[Document]]:
    for start in range(0, len(rows), BATCH_ROWS):
        yield list(row_documents(rows[start:start + BATCH_ROWS], spec, start_index=start))


class IngestService:
    def __init__(self, db: Database, embedders: EmbedderRegistry, data_sources: DataSourceService) -> None:
        self.db = db
        self.embedders = embedders
        self.data_sources = data_sources

    async def insert(self, project_name: str, kb_name: str, given: InsertInput) -> IngestStats:
        rows = self._rows(given.rows)
        query = self._query(given.query)
        if given.files is not None or given.urls is not None:
            raise BadRequest("Inserting 'files' and 'urls' is not supported by this server version",
                             title="Unsupported insert")
        if not rows and query is None and given.params is None and given.preprocessing is None:
            raise BadRequest("Nothing to insert: give 'rows', 'query', 'files' or 'urls'", title="Missing parameter")
        started = time.perf_counter()
        async with self.db.transaction() as conn:
            project = await projects.resolve(conn, project_name)
            kb = await repo.get(conn, project.id, kb_name, for_update=True) if is_identifier(kb_name) else None
            if kb is None:
                raise kb_not_found(kb_name)
            kb = await self._apply_settings(conn, kb, given)
            embedder = self.embedders.get(kb.embedding_model)
            ingestor = Ingestor(conn, kb.id, kb.storage_table, embedder, chunking_config(kb.params))
            spec = column_spec(kb)
            if rows:
                await ingestor.run(_row_batches(rows, spec))
            if query is not None:
                await ingestor.run(self._query_batches(query, spec))
            total = ingestor.stats
            await repo.update(conn, kb.id, {})
        log.info("insert into %s.%s: %s in %.2fs", project_name, kb_name, total, time.perf_counter() - started)
        return total

    @staticmethod
    def _rows(value: Any) -> list[dict[str, Any]]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise BadRequest("'rows' must be a list of JSON objects", title="Invalid rows")
        if not value:
            raise BadRequest("'rows' is empty: give at least one row", title="Invalid rows")
        for index, row in enumerate(value):
            if not isinstance(row, dict) or not row:
                raise BadRequest(f"Row {index} must be a non-empty JSON object", title="Invalid rows")
        return check_storable(value, "rows")  # type: ignore[no-any-return]

    @staticmethod
    def _query(value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise BadRequest("'query' must be a SQL SELECT string", title="Invalid SELECT query")
        return value

    async def _query_batches(self, sql: str, spec: ColumnSpec) -> AsyncIterator[list[Document]]:
        start = 0
        try:
            async for _columns, batch in self.data_sources.stream_query(sql, BATCH_ROWS):
                yield list(row_documents(batch, spec, start_index=start))
                start += len(batch)
        except NotFound as exc:  # an unknown data source is a bad query here, not a bad path
            raise BadRequest(exc.detail, title="Invalid SELECT query") from exc

    async def _apply_settings(self, conn: AsyncConnection, kb: KnowledgeBaseRow, given: InsertInput) -> KnowledgeBaseRow:
        """MindsDB lets an insert's `params` (and `preprocessing`) update the KB's settings."""
        params = check_dict(given.params, "params") if given.params is not None else {}
        values: dict[str, Any] = {}
        new_params = dict(kb.params)
        if given.preprocessing is not None:
            new_params["preprocessing"] = check_dict(given.preprocessing, "preprocessing")
        for key in ("metadata_columns", "content_columns"):
            if params.get(key) is not None:
                values[key] = check_str_list(params[key], f"params.{key}")
        if params.get("id_column") is not None:
            if not isinstance(params["id_column"], str):
                raise BadRequest("'params.id_column' must be a string", title="Invalid value")
            values["id_column"] = params["id_column"]
        if params.get("reranking_model") is not None:
            values["reranking_model"] = params["reranking_model"] or None
        if params.get("embedding_model") is not None:
            values.update(await self._embedder_change(conn, kb, params["embedding_model"]))
        for key in ("chunk_size", "chunk_overlap"):
            if key in params:
                new_params[key] = params[key]
        chunking_config(new_params)  # validate before anything is written
        if new_params != kb.params:
            values["params"] = new_params
        if not values:
            return kb
        await repo.update(conn, kb.id, values)
        updated = await repo.get(conn, kb.project_id, kb.name)
        assert updated is not None
        return updated

    async def _embedder_change(self, conn: AsyncConnection, kb: KnowledgeBaseRow, given: Any) -> dict[str, Any]:
        new = embedding_config.normalize(given, kb.embedding_model)
        same_model = all(new.get(k) == kb.embedding_model.get(k) for k in ("provider", "model_name", "dimensions"))
        if same_model:
            return {"embedding_model": new}  # e.g. a new api_key or base_url
        documents, _ = await chunks.counts(conn, kb.storage_table)
        if documents:
            raise BadRequest(
                f"Knowledge base {kb.name} holds data embedded with {kb.embedding_model.get('model_name')!r}; "
                "its embedding model cannot change. Create a new knowledge base for the new model.",
                title="Embedding model cannot change",
            )
        dim = await self.embedders.dimension(new)
        if dim != kb.vector_dim:
            await chunks.drop_chunk_table(conn, kb.storage_table)
            await chunks.create_chunk_table(conn, kb.storage_table, dim)
        return {"embedding_model": new, "vector_dim": dim,
                "params": {**kb.params, "created_embedding_model": new["model_name"], "vector_size": dim}}

