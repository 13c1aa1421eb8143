"""Ingesting into a knowledge base from the console: upload a file (stored by the files service, then
inserted by a queued job) or crawl URLs (a queued job); a job's progress as it changes (the jobs service's
change feed, as server-sent JSON), and cancelling it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import PurePath
from typing import Any

from fastapi import APIRouter, Depends, Form, Request, Response, UploadFile
from fastapi.responses import StreamingResponse

from agentkb.console import forms
from agentkb.console.knowledge_bases import job_view, kb_url
from agentkb.console.render import ConsoleRoute, see_other, services_of
from agentkb.console.session import PREFIX, check_csrf
from agentkb.console.streams import encode, sse_stream
from agentkb.errors import BadRequest
from agentkb.service.platform import Encoder, relay
from agentkb.service.types import InsertInput, JobRow

router = APIRouter(prefix=f"{PREFIX}/projects/{{project}}/knowledge_bases/{{kb}}", route_class=ConsoleRoute)
READ_BYTES = 1 << 20
NAME_TRIES = 50


def file_key(filename: str) -> str:
    """A stored file's name from an uploaded file's: its stem, lower-cased, other characters as `_`."""
    stem = PurePath(filename.replace("\\", "/")).stem.lower()
    key = re.sub(r"[^a-z0-9_]+", "_", stem).strip("_")[:50]
    return key if key and key[0].isalpha() else f"file_{key}".rstrip("_")


async def _chunks(upload: UploadFile) -> AsyncIterator[bytes]:
    while chunk := await upload.read(READ_BYTES):
        yield chunk


@router.post("/upload", dependencies=[Depends(check_csrf)])
async def upload(request: Request, project: str, kb: str, file: UploadFile | None = None) -> Response:
    """Store the file (under a free name made from its own) and queue a job inserting it."""
    if file is None or not file.filename:
        raise BadRequest("Choose a file to upload", title="No file")
    services = services_of(request)
    await services.knowledge_bases.get(project, kb)  # 404 before anything is stored
    base = file_key(file.filename)
    key = base
    for n in range(2, NAME_TRIES + 2):
        if await services.files.find(key) is None:
            break
        key = f"{base}_{n}"
    stored = await services.files.save(
        key, _chunks(file), original_name=file.filename, content_type=file.content_type
    )
    await services.ingest.submit(project, kb, InsertInput(files=[stored.name]), wait=False)
    return see_other(f"{kb_url(project, kb)}#jobs")


@router.post("/crawl", dependencies=[Depends(check_csrf)])
async def crawl(
    request: Request,
    project: str,
    kb: str,
    urls: str = Form(""),
    crawl_depth: str = Form(""),
    limit: str = Form(""),
) -> Response:
    """Queue a job crawling the URLs (one a line)."""
    given = InsertInput(
        urls=[u for u in (line.strip() for line in urls.splitlines()) if u] or None,
        crawl_depth=forms.integer(crawl_depth, "Crawl depth"),
        limit=forms.integer(limit, "Page limit", minimum=1),
    )
    if given.urls is None:
        raise BadRequest("Give at least one URL", title="No URL")
    await services_of(request).ingest.submit(project, kb, given, wait=False)
    return see_other(f"{kb_url(project, kb)}#jobs")


class JobViews(Encoder[JobRow]):
    """The job each time it changes; a stream the server's shutdown ends before the job did ends with the
    job as last sent, marked `"shutdown": true`."""

    def __init__(self, first: dict[str, Any]) -> None:
        self.sent = first

    def item(self, item: JobRow) -> list[str]:
        self.sent = job_view(item)
        return [encode(self.sent)]

    async def last(self) -> list[str]:
        return [] if self.sent["finished"] else [encode({**self.sent, "shutdown": True})]


@router.get("/jobs/{job_id}/events")
async def job_events(request: Request, project: str, kb: str, job_id: str) -> StreamingResponse:
    """The job each time it changes, until it ends (or the server shuts down)."""
    services = services_of(request)
    _, job = await services.jobs.get(project, kb, job_id)
    views = JobViews(job_view(job))
    return sse_stream(relay(services.jobs.watch(job), services.shutdown.jobs_released, views))


@router.post("/jobs/{job_id}/cancel", dependencies=[Depends(check_csrf)])
async def cancel(request: Request, project: str, kb: str, job_id: str) -> Response:
    await services_of(request).jobs.cancel(project, kb, job_id)
    return see_other(f"{kb_url(project, kb)}#jobs")
