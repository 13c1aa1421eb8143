"""`/api/projects/{project_name}/knowledge_bases`: create, list, get, insert, search, delete."""

from __future__ import annotations

from typing import Any, get_args

from fastapi import APIRouter, Header, Query, Request, Response
from pydantic import ValidationError

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import EMPTY_STRING, JSON, problems, schema_ref
from agentkb.api.schemas import (
    DeletedDocuments,
    DeleteDocumentsRequest,
    FilterCondition,
    InsertQueued,
    InsertRequest,
    KnowledgeBaseRecord,
    KnowledgeBaseRequest,
    SearchRequest,
    kb_record,
)
from agentkb.errors import BadRequest
from agentkb.service.catalog import (
    BODY_SETTING_KEYS,
    KnowledgeBaseInput,
    settings_only,
    with_body_settings,
)
from agentkb.service.types import (
    DEFAULT_ALPHA,
    DEFAULT_FUSION_K,
    Filter,
    FilterOp,
    Hit,
    IngestStats,
    InsertInput,
    SearchOptions,
)

router = APIRouter(prefix="/api/projects/{project_name}/knowledge_bases", tags=["knowledge bases"])
_OPS = set(get_args(FilterOp))


def to_filters(given: dict[str, Any] | list[FilterCondition] | None) -> tuple[Filter, ...]:
    if given is None:
        return ()
    if isinstance(given, dict):
        return tuple(
            Filter(key, "in", tuple(value)) if isinstance(value, list) else Filter(key, "=", value)
            for key, value in given.items()
        )
    filters = []
    for condition in given:
        op = condition.op.lower().strip()
        op = "!=" if op == "<>" else op
        if op not in _OPS:
            raise BadRequest(
                f"Unknown filter operator {condition.op!r}; use one of {sorted(_OPS)}", title="Invalid filter"
            )
        value = tuple(condition.value) if isinstance(condition.value, list) else condition.value
        filters.append(Filter(condition.key, op, value))  # type: ignore[arg-type]  # op is checked in _OPS
    return tuple(filters)


def search_options(body: SearchRequest) -> SearchOptions:
    """A search request (HTTP or MCP) as the search service takes it; unset tuning gets the defaults."""
    return SearchOptions(
        query=body.query,
        filters=to_filters(body.filters),
        limit=body.limit,
        offset=body.offset,
        relevance_threshold=body.relevance_threshold,
        hybrid=body.hybrid_search,
        alpha=body.hybrid_search_alpha if body.hybrid_search_alpha is not None else DEFAULT_ALPHA,
        fusion_k=body.fusion_k if body.fusion_k is not None else DEFAULT_FUSION_K,
        rerank=body.reranking,
    )


@router.get("", response_model=list[KnowledgeBaseRecord], responses=problems(404))
async def list_knowledge_bases(project_name: str, services: ServicesDep) -> Any:
    return JSON([kb_record(kb) for kb in await services.knowledge_bases.list(project_name)])


@router.post(
    "", status_code=201, response_model=KnowledgeBaseRecord, responses=problems(400, 404, 409, 413, 502)
)
async def create_knowledge_base(project_name: str, body: KnowledgeBaseRequest, services: ServicesDep) -> Any:
    fields = body.knowledge_base
    kb = await services.knowledge_bases.create(
        project_name, KnowledgeBaseInput(**fields.model_dump(include=set(KnowledgeBaseInput.__slots__)))
    )
    return JSON(kb_record(kb), status_code=201)


@router.get("/{kb_name}", response_model=KnowledgeBaseRecord, responses=problems(404))
async def get_knowledge_base(project_name: str, kb_name: str, services: ServicesDep) -> Any:
    kb = await services.knowledge_bases.get(project_name, kb_name)
    documents, chunks = await services.knowledge_bases.counts(kb)
    return JSON({**kb_record(kb), "document_count": documents, "chunk_count": chunks})


@router.put(
    "/{kb_name}",
    responses={
        200: {"description": 'Inserted: MindsDB\'s body `""`', "content": EMPTY_STRING},
        202: {"description": "Queued (async): the job's id and state", "model": InsertQueued},
        **problems(400, 404, 409, 413, 502),
    },
)
async def insert_into_knowledge_base(
    project_name: str,
    kb_name: str,
    body: InsertRequest,
    services: ServicesDep,
    async_: bool = Query(
        False, alias="async", description="Queue the insert as a job and answer 202 at once."
    ),
    prefer: str | None = Header(None, description="`respond-async` does the same as `?async=true`."),
) -> Any:
    """Insert rows / query results / files / pages (spec 4.5), and MindsDB's REST ALTER. By default the
    request waits: 200 with MindsDB's JSON body `""` once everything is stored (headers `X-Agentkb-Job` and
    `X-Agentkb-Ingest` name the job and count the work). The KB's settings (`embedding_model`,
    `reranking_model`, `id_column`, `content_columns`, `metadata_columns` beside the data, as MindsDB's
    docs send them, or in `params`; `preprocessing`) change them as ALTER KNOWLEDGE_BASE does (keys of
    the models merged, `"******"` keeping a stored key), before the data is inserted. A body of settings
    only is an ALTER: 200 `""`, no insert job."""
    fields = body.knowledge_base
    values = fields.model_dump(include=set(InsertInput.__slots__))
    values["params"] = with_body_settings(
        values["params"], {k: getattr(fields, k) for k in BODY_SETTING_KEYS}
    )
    given = InsertInput(**values)
    if given.rows is None and given.query is None and given.files is None and given.urls is None:
        settings = settings_only(given.params, given.preprocessing)
        if settings is not None:  # no data: MindsDB's PUT then only updates the KB (as ALTER KNOWLEDGE_BASE)
            await services.kb_admin.alter(project_name, kb_name, settings)
            return JSON("")
    wait = not (async_ or (prefer is not None and "respond-async" in prefer.lower()))
    job = await services.ingest.submit(project_name, kb_name, given, wait=wait)
    if not wait:
        return JSON(
            {"job_id": job.id, "state": job.state}, status_code=202, headers={"X-Agentkb-Job": job.id}
        )
    summary = ", ".join(f"{name}={int(job.counts.get(name, 0))}" for name in IngestStats.__slots__)
    return JSON("", headers={"X-Agentkb-Ingest": summary, "X-Agentkb-Job": job.id})


@router.post("/{kb_name}/search", response_model=list[Hit], responses=problems(400, 404, 413, 502))
async def search_knowledge_base(
    project_name: str, kb_name: str, body: SearchRequest, services: ServicesDep
) -> Any:
    hits = await services.search.search(project_name, kb_name, search_options(body))
    return JSON([h.as_dict() for h in hits])


@router.delete(
    "/{kb_name}",
    response_model=DeletedDocuments,
    openapi_extra={
        "requestBody": {
            "required": False,
            "description": "Absent: drop the knowledge base. Present: delete those documents / chunks only.",
            "content": {"application/json": {"schema": schema_ref(DeleteDocumentsRequest)}},
        }
    },
    responses={
        200: {"description": "Documents deleted"},
        204: {"description": "Knowledge base dropped"},
        **problems(400, 404, 413),
    },
)
async def delete_knowledge_base(
    project_name: str, kb_name: str, request: Request, services: ServicesDep
) -> Any:
    """No body: drop the knowledge base and its chunks (204). A body `{"ids": [...]}` and/or
    `{"filters": ...}`: delete those documents / matching chunks only (200 with counts)."""
    raw = await request.body()
    if not raw.strip():
        await services.knowledge_bases.delete(project_name, kb_name)
        return Response(status_code=204)
    try:
        body = DeleteDocumentsRequest.model_validate_json(raw)
    except ValidationError as exc:
        raise BadRequest(
            f"Invalid delete body: {exc.errors()[0]['msg']}", title="Invalid request body"
        ) from exc
    if body.ids is None and body.filters is None:
        raise BadRequest(
            "Give 'ids' and/or 'filters' to delete documents, or no body to drop the knowledge base"
        )
    documents, chunks = await services.knowledge_bases.delete_documents(
        project_name, kb_name, body.ids, to_filters(body.filters)
    )
    return JSON({"deleted_documents": documents, "deleted_chunks": chunks})
