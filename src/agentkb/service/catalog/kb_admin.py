"""Changing a knowledge base once it exists: its settings (`ALTER KNOWLEDGE_BASE … USING`, and `params` in
`PUT …/knowledge_bases/{kb}`), one chunk (`UPDATE <kb> SET content = … WHERE chunk_id = …`), its vector index
(`CREATE INDEX ON KNOWLEDGE_BASE`), and its last insert (what `DESCRIBE KNOWLEDGE_BASE` shows).

The settings follow MindsDB's `KnowledgeBaseController.update` (26.1): the keys of `embedding_model` and
`reranking_model` are merged into the stored ones (another reranking provider replaces the model;
`reranking_model = false` removes it), `id_column`, `content_columns`, `metadata_columns` and `preprocessing`
are replaced. `ef_search` is agentkb's own: the KB's HNSW search breadth (1..1000, overriding
AGENTKB_HNSW_EF_SEARCH; null removes it). The embedding provider, model name and dimensions are fixed once
the knowledge base holds data (MindsDB: always); before that, changing them re-sizes its chunk table.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.destinations import check_model_urls
from agentkb.errors import BadRequest, Conflict
from agentkb.kb import rerank
from agentkb.kb.chunking import ChunkingConfig, chunk_document, chunking_config, content_hash
from agentkb.kb.documents import Document
from agentkb.kb.embedders import config as embedding_config
from agentkb.kb.embedders.registry import EmbedderRegistry
from agentkb.kb.preprocessing import CONTEXTUAL
from agentkb.secrecy import SecretBox, check_bound, refuse_sealed, restore_masked
from agentkb.service.catalog import kb_lookup, kb_params
from agentkb.service.platform import access
from agentkb.storage import chunks, jobs
from agentkb.storage import knowledge_bases as repo
from agentkb.storage.db import MAX_EF_SEARCH, MIN_EF_SEARCH, Database
from agentkb.storage.jobs import JobRow
from agentkb.storage.knowledge_bases import KnowledgeBaseRow
from agentkb.validation import check_dict, check_storable, check_str_list

SETTING_KEYS = (
    "embedding_model",
    "reranking_model",
    "id_column",
    "content_columns",
    "metadata_columns",
    "preprocessing",
    "ef_search",
)
# MindsDB's ALTER validates these (KnowledgeBaseInputParams) but changes nothing with them: agentkb takes
# `is_sparse = false` and the KB's own `vector_size` (what it has), and refuses the rest by name (kb_params).
INERT_KEYS = (*kb_params.INSERT_OPTIONS, *kb_params.SPARSE_KEYS)
IDENTITY_KEYS = ("provider", "model_name", "dimensions")  # what the stored vectors depend on
INDEX_TYPES = ("hnsw", "ivf", "ivf_file")  # ivf / ivf_file: MindsDB's faiss index, answered with HNSW
FAISS_OPTIONS = ("nlist", "train_count")  # accepted for MindsDB's faiss storage; HNSW has no such knobs
INDEX_LIMITS = {"m": (2, 100), "ef_construction": (4, 1000)}  # pgvector's bounds


# MindsDB's REST ALTER (docs/rest/knowledge_bases/alter.mdx) sends these beside the data, not in `params`
BODY_SETTING_KEYS = ("embedding_model", "reranking_model", "content_columns", "metadata_columns", "id_column")


def with_body_settings(params: Any, beside: Mapping[str, Any]) -> Any:
    """A `PUT …/knowledge_bases/{kb}` body's `params` with the settings given beside them (`beside`: keys of
    `BODY_SETTING_KEYS`, None left out) merged in; 400 when one is given both ways, differently."""
    given = {k: v for k, v in beside.items() if v is not None}
    if not given:
        return params
    merged = dict(check_dict(params, "params")) if params is not None else {}
    for key, value in given.items():
        if key in merged and merged[key] != value:
            raise BadRequest(
                f"'{key}' is given twice, in 'params' and beside it, with different values: give it once",
                title="Invalid parameter",
            )
        merged[key] = value
    return merged


def settings_only(params: Any, preprocessing: Any) -> dict[str, Any] | None:
    """The settings of a `PUT …/knowledge_bases/{kb}` body that holds nothing else (no data, no other
    `params`), else None: such a body is an ALTER (MindsDB's PUT updates the KB with them)."""
    if params is not None and not isinstance(params, dict):
        return None
    given = {k: v for k, v in (params or {}).items() if v is not None}
    if set(given) - set(SETTING_KEYS):
        return None
    if preprocessing is not None:
        given["preprocessing"] = preprocessing
    return given or None


def read_chunking(params: Mapping[str, Any], box: SecretBox, kb_name: str) -> ChunkingConfig:
    """A knowledge base's chunking from its stored `params` (`kb.preprocessing.chunking_config`), its
    `preprocessing` revealed: a contextual LLM's key, or a URL password in a template, is stored sealed."""
    preprocessing = params.get("preprocessing")
    if preprocessing is not None:
        params = {
            **params,
            "preprocessing": box.reveal(preprocessing, f"knowledge base {kb_name} preprocessing"),
        }
    return chunking_config(params)


def check_ef_search(value: Any) -> int:
    """A knowledge base's `ef_search` param: pgvector's HNSW search breadth, an integer 1..1000."""
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_EF_SEARCH <= value <= MAX_EF_SEARCH:
        raise BadRequest(
            f"'ef_search' must be an integer from {MIN_EF_SEARCH} to {MAX_EF_SEARCH} (the HNSW search "
            f"breadth; wider: better recall, slower), got {value!r}",
            title="Invalid value",
        )
    return value


def new_reranking(current: dict[str, Any] | None, given: Any) -> dict[str, Any] | None:
    """The `reranking_model` an update makes of the stored one (not sealed yet); 400 when it would send a
    stored key to another server (`secrecy.check_bound`)."""
    if given is None or given is False:
        return None  # MindsDB stores {} for `false`: no reranking either way
    requested = check_dict(given, "reranking_model")
    kb_params.check_model_fields(
        "reranking_model", requested, requested.get("provider", (current or {}).get("provider"))
    )
    restored = restore_masked(requested, current or {})
    if "provider" in restored and restored["provider"] != (current or {}).get("provider"):
        new = dict(restored)  # another provider: the given model alone
    else:
        new = {**(current or {}), **restored}
    check_bound(current or {}, new, requested, "reranking_model.")
    check_model_urls(new, "reranking_model")
    return new or None


def new_embedding(current: dict[str, Any], given: Any) -> dict[str, Any]:
    """The `embedding_model` an update makes of the stored one (not sealed nor validated yet): its keys merged
    into the stored model (same provider), `******` keeping a stored secret; 400 when it would send a stored
    key to another server (`secrecy.check_bound`)."""
    requested = _requested_embedding(given)
    kb_params.check_model_fields(
        "embedding_model", requested, requested.get("provider", current.get("provider"))
    )
    restored = restore_masked(requested, current)
    same_provider = restored.get("provider", current.get("provider")) == current.get("provider")
    new = {**current, **restored} if same_provider else dict(restored)  # as embedding_config.normalize
    check_bound(current, new, requested, "embedding_model.")
    return new


def _requested_embedding(given: Any) -> dict[str, Any]:
    return {"model_name": given} if isinstance(given, str) else check_dict(given, "embedding_model")


def _flat(llm: dict[str, Any]) -> dict[str, Any]:
    """An `llm_config` with its `params` laid under its own keys (`kb.preprocessing.llm_model`)."""
    nested = llm.get("params")
    return {**(nested if isinstance(nested, dict) else {}), **{k: v for k, v in llm.items() if k != "params"}}


def new_preprocessing(current: Any, given: Any) -> dict[str, Any]:
    """The `preprocessing` an update stores (replacing the stored one, as MindsDB): `******` sent back keeps
    the stored secret at its place (a contextual LLM's key), unless the LLM's server changed (400)."""
    requested = check_dict(given, "preprocessing")
    if not isinstance(current, dict):
        refuse_sealed(requested, None, "preprocessing.")
        return requested
    restored: dict[str, Any] = restore_masked(requested, current)
    old: Any = current
    new: Any = restored
    sent: Any = requested
    for part in ("contextual_config", "llm_config"):
        old, new, sent = (v.get(part) if isinstance(v, dict) else None for v in (old, new, sent))
    refuse_sealed(requested, current, "preprocessing.")
    if isinstance(old, dict) and isinstance(new, dict):  # `llm_config.params` laid under, as it is read
        where = "preprocessing.contextual_config.llm_config."
        check_bound(_flat(old), _flat(new), _flat(sent if isinstance(sent, dict) else {}), where)
    return restored


def check_secrets(kb: KnowledgeBaseRow, changes: Mapping[str, Any]) -> None:
    """400 (before anything is queued or written) when `changes` would send a stored key of `kb`'s models
    to another server: an insert's `params` are checked when it is submitted, and again when it runs."""
    if changes.get("embedding_model") is not None:
        new_embedding(kb.embedding_model, changes["embedding_model"])
    if changes.get("reranking_model") is not None:
        new_reranking(kb.reranking_model, changes["reranking_model"])
    if changes.get("preprocessing") is not None:
        new_preprocessing(kb.params.get("preprocessing"), changes["preprocessing"])


def _columns(given: Any, key: str) -> list[str] | None:
    return None if given is None else check_str_list(given, key)


def _id_column(given: Any) -> str | None:
    if given is not None and (not isinstance(given, str) or not given):
        raise BadRequest("'id_column' must be a non-empty string", title="Invalid value")
    return check_storable(given, "id_column")  # type: ignore[no-any-return]


async def _embedding(
    conn: AsyncConnection, kb: KnowledgeBaseRow, given: Any, embedders: EmbedderRegistry, box: SecretBox
) -> dict[str, Any]:
    """The row values for a new `embedding_model`: keys merged into the stored model (same provider); its
    secrets sealed (`******` sent back keeps the stored one)."""
    current = kb.embedding_model
    requested = _requested_embedding(given)
    changed = [k for k in IDENTITY_KEYS if k in requested and requested[k] != current.get(k)]
    if changed and await chunks.has_chunks(conn, kb.storage_table):
        raise BadRequest(
            f"You can't update '{changed[0]}' setting: knowledge base {kb.name} holds data embedded with "
            f"{current.get('provider')}/{current.get('model_name')}. Create a new knowledge base for another "
            "embedding model.",
            title="Embedding model cannot change",
        )
    new = box.seal(embedding_config.normalize(new_embedding(current, given), current))
    if all(new.get(k) == current.get(k) for k in IDENTITY_KEYS):
        return {"embedding_model": new}  # e.g. a new api_key or base_url
    dim = await embedders.dimension(box.reveal(new, f"knowledge base {kb.name} embedding_model"))
    if dim != kb.vector_dim:
        await chunks.drop_chunk_table(conn, kb.storage_table)
        await chunks.create_chunk_table(conn, kb.storage_table, dim)
    params = {**kb.params, "created_embedding_model": new["model_name"], "vector_size": dim}
    return {"embedding_model": new, "vector_dim": dim, "params": params}


async def apply_settings(
    conn: AsyncConnection,
    kb: KnowledgeBaseRow,
    changes: Mapping[str, Any],
    embedders: EmbedderRegistry,
    box: SecretBox,
) -> KnowledgeBaseRow:
    """Apply `changes` (keys of `SETTING_KEYS`) to `kb`, inside the caller's transaction (which holds the
    KB's row lock); the updated row. Shared by ALTER, the REST PUT and inserts carrying `params`."""
    values: dict[str, Any] = {}
    if "embedding_model" in changes:
        values.update(await _embedding(conn, kb, changes["embedding_model"], embedders, box))
    if "reranking_model" in changes:
        reranking = new_reranking(kb.reranking_model, changes["reranking_model"])
        if reranking is not None:  # a provider, method and settings it can be called with (400 otherwise)
            rerank.check_model(box.reveal(reranking, f"knowledge base {kb.name} reranking_model"))
        values["reranking_model"] = box.seal(reranking)
    if "id_column" in changes:
        values["id_column"] = _id_column(changes["id_column"])
    for key in ("content_columns", "metadata_columns"):
        if key in changes:
            values[key] = _columns(changes[key], key)
    params = dict(values.get("params", kb.params))
    if "preprocessing" in changes:
        if changes["preprocessing"] is None:
            params.pop("preprocessing", None)
        else:
            params["preprocessing"] = new_preprocessing(
                kb.params.get("preprocessing"), changes["preprocessing"]
            )
        read_chunking(params, box, kb.name)  # checked as it will be read (a `******` kept a sealed value)
    if "ef_search" in changes:
        if changes["ef_search"] is None:
            params.pop("ef_search", None)
        else:
            params["ef_search"] = check_ef_search(changes["ef_search"])
    values["params"] = box.seal(params)  # a contextual LLM's new key
    if all(getattr(kb, key) == value for key, value in values.items()):
        return kb
    # a settings change keeps the chunks' caches (BM25); a new chunk table (another dimension) does not
    await repo.update(conn, kb.id, values, content="vector_dim" in values)
    updated = await repo.get_by_id(conn, kb.id)
    assert updated is not None
    return updated


def index_options(given: Mapping[str, Any]) -> dict[str, int] | None:
    """`CREATE INDEX ON KNOWLEDGE_BASE … WITH (…)`: pgvector's HNSW `m` / `ef_construction`, or None (rebuild
    the index as it is). MindsDB's faiss options (`type = 'ivf' | 'ivf_file'`, `nlist`, `train_count`) are
    accepted: agentkb's index is always HNSW."""
    options = {str(k).lower(): v for k, v in given.items()}
    kind = options.pop("type", options.pop("index_type", None))
    if kind is not None and str(kind).lower() not in INDEX_TYPES:
        raise BadRequest(
            f"Index type {kind!r} is not supported: a knowledge base's vector index is pgvector HNSW; tune it "
            "with WITH (m = 16, ef_construction = 64)",
            title="Invalid index",
        )
    hnsw: dict[str, int] = {}
    for key, value in options.items():
        if key in FAISS_OPTIONS and isinstance(value, int):
            continue
        low, high = INDEX_LIMITS.get(key, (0, -1))
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise BadRequest(
                f"Index option {key!r} is not supported (got {value!r}); use m (2..100) and ef_construction "
                "(4..1000, at least 2 × m)",
                title="Invalid index",
            )
        hnsw[key] = value
    if hnsw.get("ef_construction", 64) < 2 * hnsw.get("m", 16):
        raise BadRequest("ef_construction must be at least 2 × m", title="Invalid index")
    return hnsw or None


class KnowledgeBaseAdmin:
    def __init__(
        self,
        db: Database,
        embedders: EmbedderRegistry,
        *,
        box: SecretBox | None = None,
        session_db: Database | None = None,
    ) -> None:
        """`session_db`: where the merge lock (session-level) is held (default `db`)."""
        self.db = db
        self.session_db = session_db or db
        self.embedders = embedders
        self.box = box or SecretBox.from_environment()

    async def _locked(self, conn: AsyncConnection, project_name: str, kb_name: str) -> KnowledgeBaseRow:
        """The KB, its row locked (inserts take the same lock: they wait, and are waited for)."""
        return await kb_lookup.find(conn, project_name, kb_name, for_update=True)

    async def alter(self, project_name: str, kb_name: str, changes: Mapping[str, Any]) -> KnowledgeBaseRow:
        """`ALTER KNOWLEDGE_BASE … USING …` and `PUT …/knowledge_bases/{kb}` with settings only."""
        access.require_write("changing a knowledge base")
        access.require_project(project_name)
        kb_params.check_keys(changes, (*SETTING_KEYS, *kb_params.SPARSE_KEYS), "ALTER KNOWLEDGE_BASE")
        kb_params.check_sparse(changes, None)
        settings = {k: v for k, v in changes.items() if k in SETTING_KEYS}
        async with self.db.transaction() as conn:
            kb = await self._locked(conn, project_name, kb_name)
            kb_params.check_sparse(changes, kb.vector_dim)
            return await apply_settings(conn, kb, settings, self.embedders, self.box)

    async def update_chunk(
        self, project_name: str, kb_name: str, chunk_id: str, *, content: Any, metadata: Any
    ) -> int:
        """`UPDATE <kb> SET content = …[, metadata = …] WHERE chunk_id = …`; the number of chunks changed.
        As MindsDB: the new content goes through the KB's chunking and the chunk keeps the first piece, then
        is embedded again. The chunk keeps its id, document and bookkeeping metadata (`_…` keys); `metadata`
        replaces the rest (MindsDB: metadata not given is emptied)."""
        access.require_write("updating a chunk")
        access.require_project(project_name)
        if content is not None and (not isinstance(content, str) or not content):
            raise BadRequest("content must be a non-empty string", title="Invalid value")
        check_storable(content, "content")
        user_metadata = None if metadata is None else check_dict(metadata, "metadata")
        async with self.db.transaction() as conn:
            kb = await self._locked(conn, project_name, kb_name)
            chunking = read_chunking(kb.params, self.box, kb.name)
            if content is not None and chunking.kind == CONTEXTUAL:
                raise BadRequest(
                    f"UPDATE … SET content is not supported on knowledge base {kb.name}: its preprocessing is "
                    "'contextual' (an LLM writes each chunk's context from the whole document); insert the "
                    "document again instead",
                    title="Invalid update",
                )
            stored = await chunks.get_chunk(conn, kb.storage_table, chunk_id)
            if stored is None:
                return 0
            await chunks.lock_documents(conn, kb.id, [stored.doc_id])
            text, digest, vector = stored.content, stored.content_hash, stored.embedding
            updated_at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
            if content is not None:
                doc = Document(stored.doc_id, None, "content", content)
                text = chunk_document(doc, chunking, updated_at)[0].content
                digest = content_hash(text)
                if digest != stored.content_hash:
                    reused = await chunks.embeddings_by_hash(conn, kb.storage_table, [digest])
                    if digest in reused:
                        vector = reused[digest]
                    else:
                        model = self.box.reveal(
                            kb.embedding_model, f"knowledge base {kb.name} embedding_model"
                        )
                        vector = (await self.embedders.get(model).embed_documents([text]))[0]
            meta = dict(stored.metadata)
            if user_metadata is not None:
                meta = {**{k: v for k, v in meta.items() if k.startswith("_")}, **user_metadata}
            meta["_updated_at"] = updated_at
            write = chunks.ChunkWrite(chunk_id, stored.doc_id, text, digest, meta, vector)
            await chunks.upsert_chunks(conn, kb.storage_table, [write])
            await repo.update(conn, kb.id, {}, content=True)  # a new version: search caches (BM25) rebuild
            return 1

    async def rebuild_index(self, project_name: str, kb_name: str, given: Mapping[str, Any]) -> None:
        """`CREATE INDEX ON KNOWLEDGE_BASE <kb> [WITH (…)]`: REINDEX, or build the HNSW index with new
        `m` / `ef_construction` (kept in `params.vector_index`, so later bulk loads build it the same way)."""
        access.require_write("building an index")
        access.require_project(project_name)
        options = index_options(given)
        async with self.session_db.read() as lock_conn:
            table = (await kb_lookup.find(lock_conn, project_name, kb_name)).storage_table
            async with chunks.merge_lock(lock_conn, table), self.db.transaction() as conn:
                kb = await self._locked(conn, project_name, kb_name)
                if kb.storage_table != table:  # dropped and created again meanwhile: lock the new table
                    raise Conflict(f"Knowledge base {kb_name} was replaced meanwhile; try again")
                await chunks.rebuild_vector_index(
                    conn, kb.storage_table, kb.vector_dim, options or kb.params.get("vector_index")
                )
                if options is not None:
                    await repo.update(
                        conn, kb.id, {"params": {**kb.params, "vector_index": options}}, content=False
                    )

    async def last_job(self, kb: KnowledgeBaseRow) -> JobRow | None:
        """The KB's latest insert (DESCRIBE's INSERT_STARTED_AT, …, QUERY_ID)."""
        async with self.db.connect() as conn:
            found = await jobs.list_for_kb(conn, kb.id, 1)
        return found[0] if found else None
