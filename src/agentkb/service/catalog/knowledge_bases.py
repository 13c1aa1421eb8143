"""Knowledge bases: records plus their chunk tables, created and dropped together.

Secret fields of `embedding_model`, `reranking_model` and `params` are stored sealed
(`secrecy.SecretBox`); rows come back sealed, `service.catalog.shown` masks them for clients, and the search and ingest services
reveal them where they call the provider."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.destinations import check_model_urls
from agentkb.errors import BadRequest, Conflict, project_not_found
from agentkb.kb import rerank
from agentkb.kb.chunking import chunking_config
from agentkb.kb.embedders import config as embedding_config
from agentkb.kb.filters import Filter
from agentkb.secrecy import SecretBox, drop_carried, refuse_sealed
from agentkb.service.catalog import kb_lookup, kb_params, projects
from agentkb.service.catalog.kb_admin import check_ef_search
from agentkb.service.platform import access
from agentkb.storage import chunk_contexts, chunk_search, chunks
from agentkb.storage import knowledge_bases as repo
from agentkb.storage.chunk_filters import compile_filters
from agentkb.storage.db import Database
from agentkb.storage.knowledge_bases import KnowledgeBaseRow
from agentkb.storage.projects import Project
from agentkb.storage.read_routing import ReadRouter
from agentkb.validation import check_dict, check_name, check_storable, check_str_list

VECTOR_DATABASE = "agentkb_pgvector"
DimensionResolver = Callable[[dict[str, Any]], Awaitable[int]]


@dataclass(frozen=True, slots=True)
class KnowledgeBaseInput:
    """A knowledge-base create body; None means "not sent"."""

    name: Any = None
    embedding_model: Any = None
    reranking_model: Any = None
    metadata_columns: Any = None
    content_columns: Any = None
    id_column: Any = None
    params: Any = None
    preprocessing: Any = None
    storage: Any = None


# The model and column settings MindsDB reads from a create body's top level or from its `params` (the top
# level wins): `POST .../knowledge_bases` copies them into params, then its controller takes them out again.
SETTING_KEYS = ("embedding_model", "reranking_model", "metadata_columns", "content_columns", "id_column")
# what else `params` may hold (`kb_params`): the rest is refused by name
CREATE_KEYS = (*SETTING_KEYS, "preprocessing", "ef_search", *kb_params.CHUNKING_KEYS, *kb_params.SPARSE_KEYS)


def _reranking(value: Any, default: dict[str, Any]) -> dict[str, Any] | None:
    """MindsDB's `get_model_params` for the reranker: `false` means none; nothing (or `{}`) means the
    default; a model of the default's provider (or of none) is merged over the default; another provider's
    model is taken alone."""
    if value is False:
        return None
    given = check_dict(value, "reranking_model") if value is not None else {}
    check_model_urls(given, "reranking_model")
    if "provider" in given and given["provider"] != default.get("provider"):
        rerank.check_model(given)
        return given
    merged = drop_carried(default, {**default, **given}, given)  # the default's key stays with its server
    if merged:
        rerank.check_model(merged)  # a provider, method and settings it can be called with (400 otherwise)
    return merged or None


def _columns(value: Any, field: str) -> list[str] | None:
    return None if value is None else check_str_list(value, field)


def _id_column(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise BadRequest("'id_column' must be a non-empty string", title="Invalid value")
    return check_storable(value, "id_column")  # type: ignore[no-any-return]


class KnowledgeBaseService:
    def __init__(
        self,
        db: Database,
        default_embedding_model: dict[str, Any],
        dimension: DimensionResolver,
        default_reranking_model: dict[str, Any] | None = None,
        *,
        box: SecretBox | None = None,
        reads: ReadRouter | None = None,
    ) -> None:
        self.db = db
        self.reads = reads or ReadRouter(db, None)  # listings: on a replica when AGENTKB_DATABASE_READ_URL
        self.default_embedding_model = default_embedding_model
        self.default_reranking_model = dict(default_reranking_model or {})
        self.dimension = dimension
        self.box = box or SecretBox.from_environment()

    async def list(self, project_name: str) -> list[KnowledgeBaseRow]:
        access.require_project(project_name)

        async def listing(conn: AsyncConnection) -> tuple[Project | None, list[KnowledgeBaseRow]]:
            return await repo.list_in_project(conn, project_name)

        return await projects.rows_in_project(project_name, lambda: self.reads.run(listing))

    async def get(self, project_name: str, name: str) -> KnowledgeBaseRow:
        return await kb_lookup.read(self.db, project_name, name)

    async def create(self, project_name: str, given: KnowledgeBaseInput) -> KnowledgeBaseRow:
        access.require_write("creating a knowledge base")
        access.require_project(project_name)
        name = check_name(given.name, "name")
        params = dict(check_dict(given.params, "params")) if given.params is not None else {}
        params = {k: v for k, v in params.items() if v is not None}  # the SDKs send nulls for "not given"
        settings = {key: params.pop(key) for key in SETTING_KEYS if key in params}
        settings.update({key: getattr(given, key) for key in SETTING_KEYS if getattr(given, key) is not None})
        preprocessing = params.pop("preprocessing", None)
        if given.preprocessing is not None:  # the body's wins over one in `params`, as in MindsDB
            preprocessing = given.preprocessing
        refuse_sealed({**params, **settings, "preprocessing": preprocessing})
        kb_params.refuse_storage(given.storage)
        kb_params.check_keys(params, CREATE_KEYS, "a knowledge base's params")
        kb_params.check_sparse(params, None)
        given_embedding = settings.get("embedding_model") or None
        embedding = embedding_config.normalize(given_embedding, self.default_embedding_model)
        for key in ("embedding_model", "reranking_model"):  # the fields the request gives, each read
            model = settings.get(key)
            kb_params.check_model_fields(
                key, model, model.get("provider") if isinstance(model, dict) else None
            )
        if isinstance(given_embedding, dict):  # the default's key stays with the default's server
            embedding = drop_carried(self.default_embedding_model, embedding, given_embedding)
        if "ef_search" in params:  # the KB's HNSW search breadth (kb_admin)
            params["ef_search"] = check_ef_search(params["ef_search"])
        if preprocessing is not None:
            params["preprocessing"] = check_dict(preprocessing, "preprocessing")
        chunking_config(params)  # every chunking setting checked before anything is stored
        values = {
            "name": name,
            "embedding_model": self.box.seal(embedding),
            "reranking_model": self.box.seal(
                _reranking(settings.get("reranking_model"), self.default_reranking_model)
            ),
            "metadata_columns": _columns(settings.get("metadata_columns"), "metadata_columns"),
            "content_columns": _columns(settings.get("content_columns"), "content_columns"),
            "id_column": _id_column(settings.get("id_column")),
        }
        async with self.db.read() as conn:  # fail fast (404) before any embedder is probed
            await projects.resolve(conn, project_name)
        dim = await self.dimension(embedding)
        kb_params.check_sparse(params, dim)
        params.update(
            created_embedding_model=embedding["model_name"],
            default_vector_storage=VECTOR_DATABASE,
            vector_size=dim,
        )
        try:
            async with self.db.transaction() as conn:
                project = await projects.resolve(conn, project_name)
                kb_id = await repo.next_id(conn)
                table = chunks.table_name(kb_id)
                await chunks.create_chunk_table(conn, table, dim)
                row = {
                    **values,
                    "id": kb_id,
                    "project_id": project.id,
                    "params": self.box.seal(params),
                    "storage_table": table,
                    "vector_dim": dim,
                }
                if not await repo.insert_new(conn, row):
                    raise Conflict(
                        f"Knowledge Base with name {name} already exists",
                        title="Knowledge Base already exists",
                    )
                kb = await repo.get(conn, project.id, name)
        except IntegrityError as exc:  # the project was deleted meanwhile
            raise project_not_found(project_name) from exc
        assert kb is not None
        return kb

    async def delete(self, project_name: str, name: str) -> None:
        access.require_write("deleting a knowledge base")
        access.require_project(project_name)
        async with self.db.transaction() as conn:
            kb = await kb_lookup.find(conn, project_name, name, for_update=True)
            await chunks.drop_chunk_table(conn, kb.storage_table)
            await chunk_contexts.delete_for_kb(conn, kb.id)
            await repo.delete(conn, kb.id)

    async def counts(self, kb: KnowledgeBaseRow) -> tuple[int, int]:
        """(documents, chunks) stored in the knowledge base."""
        async with self.db.read() as conn:
            return await chunks.counts(conn, kb.storage_table)

    async def delete_documents(
        self, project_name: str, kb_name: str, ids: Sequence[Any] | None, filters: tuple[Filter, ...]
    ) -> tuple[int, int]:
        """Delete whole documents by id and/or the chunks matching metadata filters; (documents, chunks)."""
        access.require_write("deleting documents")
        access.require_project(project_name)
        conditions = list(filters)
        if ids is not None:
            conditions.append(Filter("id", "in", tuple(ids)))
        where, params = compile_filters(conditions)
        async with self.db.transaction() as conn:
            kb = await kb_lookup.find(conn, project_name, kb_name, for_update=True)
            deleted = await chunk_search.delete_where(conn, kb.storage_table, where, params)
            await repo.update(conn, kb.id, {}, content=True)
            return deleted
