"""Knowledge bases in the console: the list with document and chunk counts, create, one knowledge base's
page (search with filters, its ingestion jobs, the ingest forms), browsing its documents and chunks, and
deleting documents or the whole knowledge base."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request, Response

from agentkb.console import forms
from agentkb.console.render import ConsoleRoute, page, see_other, services_of
from agentkb.console.session import PREFIX, check_csrf
from agentkb.errors import BadRequest
from agentkb.service.catalog import KnowledgeBaseInput, fit_to_show
from agentkb.service.types import Filter, KnowledgeBaseRow, SearchOptions

router = APIRouter(prefix=f"{PREFIX}/projects/{{project}}/knowledge_bases", route_class=ConsoleRoute)
PAGE_CHUNKS = 50
JOBS_SHOWN = 10


def kb_url(project: str, kb: str | None = None) -> str:
    base = f"{PREFIX}/projects/{project}/knowledge_bases"
    return f"{base}/{kb}" if kb else base


def shown(kb: KnowledgeBaseRow, documents: int | None = None, chunks: int | None = None) -> dict[str, Any]:
    """What a page may show of a knowledge base (secrets masked)."""
    fit = fit_to_show(kb)
    return {
        "name": kb.name,
        "embedding_model": fit.embedding_model,
        "reranking_model": fit.reranking_model,
        "metadata_columns": kb.metadata_columns,
        "content_columns": kb.content_columns,
        "id_column": kb.id_column,
        "updated_at": kb.updated_at,
        "documents": documents,
        "chunks": chunks,
    }


@router.get("")
async def list_kbs(request: Request, project: str) -> Response:
    service = services_of(request).knowledge_bases
    rows = []
    for kb in await service.list(project):
        rows.append(shown(kb, *await service.counts(kb)))
    return await page(request, "knowledge_bases.html", project=project, section="kbs", kbs=rows)


@router.post("", dependencies=[Depends(check_csrf)])
async def create_kb(
    request: Request,
    project: str,
    name: str = Form(""),
    embedding_model: str = Form(""),
    reranking_model: str = Form(""),
    metadata_columns: str = Form(""),
    content_columns: str = Form(""),
    id_column: str = Form(""),
) -> Response:
    given = KnowledgeBaseInput(
        name=forms.text(name),
        embedding_model=forms.json_object(embedding_model, "Embedding model"),
        reranking_model=forms.json_object(reranking_model, "Reranking model"),
        metadata_columns=forms.names(metadata_columns),
        content_columns=forms.names(content_columns),
        id_column=forms.text(id_column),
    )
    kb = await services_of(request).knowledge_bases.create(project, given)
    return see_other(kb_url(project, kb.name))


def job_view(job: Any) -> dict[str, Any]:
    return {
        "id": job.id,
        "state": job.state,
        "mode": job.mode,
        "counts": job.counts,
        "error": job.error,
        "errors": job.errors[:5],
        "created_at": job.created_at,
        "finished": job.finished_at is not None,
        "sources": job.request.get("files") or job.request.get("urls") or [],
    }


@router.get("/{kb}")
async def kb_page(
    request: Request,
    project: str,
    kb: str,
    q: str = "",
    filters: str = "",
    limit: str = "10",
    relevance_threshold: str = "",
    hybrid: str = "",
    searched: str = "",
) -> Response:
    """The knowledge base, its jobs and ingest forms; with `searched`, the results of a search too (the
    search form is a GET: htmx swaps in only the results part)."""
    services = services_of(request)
    row = await services.knowledge_bases.get(project, kb)
    documents, chunks = await services.knowledge_bases.counts(row)
    _, jobs = await services.jobs.list(project, kb, JOBS_SHOWN)
    hits = None
    if searched:
        options = SearchOptions(
            query=forms.text(q),
            filters=forms.filters(filters),
            limit=forms.integer(limit, "Limit", minimum=1, default=10),
            relevance_threshold=forms.number(relevance_threshold, "Relevance threshold"),
            hybrid=bool(hybrid),
        )
        hits = [h.as_dict() for h in await services.search.search(project, kb, options)]
    return await page(
        request,
        "knowledge_base.html",
        project=project,
        section="kbs",
        kb=shown(row, documents, chunks),
        jobs=[job_view(j) for j in jobs],
        hits=hits,
        search={
            "q": q,
            "filters": filters,
            "limit": limit,
            "relevance_threshold": relevance_threshold,
            "hybrid": bool(hybrid) or not searched,
        },
    )


@router.get("/{kb}/documents")
async def documents_page(
    request: Request, project: str, kb: str, offset: str = "0", document: str = ""
) -> Response:
    """Chunks in storage order, a page at a time, grouped by document; or one document's chunks."""
    services = services_of(request)
    row = await services.knowledge_bases.get(project, kb)
    documents, chunks = await services.knowledge_bases.counts(row)
    start = forms.integer(offset, "Offset", default=0) or 0
    wanted = forms.text(document)
    options = SearchOptions(
        filters=(Filter("id", "=", wanted),) if wanted is not None else (),
        limit=PAGE_CHUNKS,
        offset=start,
    )
    hits = await services.search.search_kb(row, options)
    grouped: dict[str, list[dict[str, Any]]] = {}
    for hit in hits:
        grouped.setdefault(str(hit.id), []).append(hit.as_dict())
    return await page(
        request,
        "documents.html",
        project=project,
        section="kbs",
        kb=shown(row, documents, chunks),
        groups=grouped,
        offset=start,
        page_size=PAGE_CHUNKS,
        more=len(hits) == PAGE_CHUNKS,
        document=wanted or "",
    )


@router.post("/{kb}/documents/delete", dependencies=[Depends(check_csrf)])
async def delete_documents(
    request: Request, project: str, kb: str, ids: Annotated[list[str] | None, Form()] = None
) -> Response:
    if not ids:
        raise BadRequest("Choose the documents to delete", title="Nothing to delete")
    await services_of(request).knowledge_bases.delete_documents(project, kb, ids, ())
    return see_other(f"{kb_url(project, kb)}/documents")


@router.post("/{kb}/delete", dependencies=[Depends(check_csrf)])
async def drop_kb(request: Request, project: str, kb: str) -> Response:
    await services_of(request).knowledge_bases.delete(project, kb)
    return see_other(kb_url(project))
