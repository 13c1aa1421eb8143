"""`/api/projects/{p}/knowledge_bases/{kb}/jobs`: ingestion jobs — list, one, progress events, cancel."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON, event_stream, problems
from agentkb.api.schemas import JobRecord, job_record
from agentkb.api.sse import JobRecords, sse_stream
from agentkb.service.platform import relay
from agentkb.service.types import JobRow

log = logging.getLogger("agentkb.api.jobs")
LAST_READ_TIMEOUT_S = 2.0
SHUTDOWN_DETAIL = (
    "The server is shutting down and this stream ends. A job this server was running is back in the queue "
    "(state queued) and resumes on the next worker, or when the server starts again; reconnect to follow it."
)

router = APIRouter(
    prefix="/api/projects/{project_name}/knowledge_bases/{kb_name}/jobs", tags=["ingestion jobs"]
)


@router.get("", response_model=list[JobRecord], responses=problems(400, 404))
async def list_jobs(
    project_name: str, kb_name: str, services: ServicesDep, limit: int = Query(50, ge=1, le=1000)
) -> Any:
    kb, rows = await services.jobs.list(project_name, kb_name, limit)
    return JSON([job_record(j, kb.project_name, kb.name) for j in rows])


@router.get("/{job_id}", response_model=JobRecord, responses=problems(404))
async def get_job(project_name: str, kb_name: str, job_id: str, services: ServicesDep) -> Any:
    kb, job = await services.jobs.get(project_name, kb_name, job_id)
    return JSON(job_record(job, kb.project_name, kb.name))


@router.delete(
    "/{job_id}",
    response_model=JobRecord,
    responses={
        200: {"description": "Cancelled (a queued job), or already finished"},
        202: {
            "description": "Cancel requested: the running job stops at its next progress check",
            "model": JobRecord,
        },
        **problems(404),
    },
)
async def cancel_job(project_name: str, kb_name: str, job_id: str, services: ServicesDep) -> Any:
    """Cancel: a queued job ends at once, a running one at its next progress check (its transaction is
    rolled back, so nothing of it is stored). A finished job is left as it is."""
    kb, job = await services.jobs.cancel(project_name, kb_name, job_id)
    return JSON(job_record(job, kb.project_name, kb.name), status_code=202 if job.state == "running" else 200)


@router.get(
    "/{job_id}/events",
    response_class=StreamingResponse,
    responses={
        200: event_stream(JobRecord, "The job record each time it changes, until it ends"),
        **problems(404),
    },
)
async def job_events(
    project_name: str, kb_name: str, job_id: str, services: ServicesDep
) -> StreamingResponse:
    """Server-sent events: the job record each time it changes, until it ends. When the server shuts
    down, the stream ends with the record as it then is (a job this server ran is back in the queue),
    marked `"shutdown": true`."""
    kb, job = await services.jobs.get(project_name, kb_name, job_id)

    def as_record(row: JobRow) -> dict[str, Any]:
        return job_record(row, kb.project_name, kb.name)

    async def last_words(last: dict[str, Any] | None) -> dict[str, Any]:
        record = last or job_record(job, kb.project_name, kb.name)
        try:
            async with asyncio.timeout(LAST_READ_TIMEOUT_S):
                _, now = await services.jobs.get(project_name, kb_name, job_id)
            record = job_record(now, kb.project_name, kb.name)
        except Exception:  # noqa: BLE001 - the database may be going away too: the last record sent
            log.warning("job %s: could not read its state for the stream's last event", job_id)
        return {**record, "shutdown": True, "detail": SHUTDOWN_DETAIL}

    records = JobRecords(as_record, last_words)
    return sse_stream(relay(services.jobs.watch(job), services.shutdown.jobs_released, records))
