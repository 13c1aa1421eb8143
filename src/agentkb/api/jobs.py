"""`/api/projects/{p}/knowledge_bases/{kb}/jobs`: ingestion jobs — list, one, progress events, cancel."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON
from agentkb.errors import NotFound
from agentkb.storage import jobs
from agentkb.storage.jobs import TERMINAL, JobRow
from agentkb.timestamps import optional_timestamp, timestamp

router = APIRouter(prefix="/api/projects/{project_name}/knowledge_bases/{kb_name}/jobs", tags=["ingestion jobs"])
POLL_S = 0.25


def job_record(job: JobRow, project: str, kb: str) -> dict[str, Any]:
    end = job.finished_at
    duration = (end - job.started_at).total_seconds() if end and job.started_at else None
    return {
        "id": job.id, "project": project, "knowledge_base": kb, "mode": job.mode, "state": job.state,
        "counts": job.counts, "errors": job.errors, "error": job.error, "worker": job.worker,
        "attempts": job.attempts, "cancel_requested": job.cancel_requested,
        "created_at": timestamp(job.created_at), "started_at": optional_timestamp(job.started_at),
        "finished_at": optional_timestamp(end),
        "duration_s": round(duration, 3) if duration is not None else None,
    }


async def _job(services: Any, project: str, kb_name: str, job_id: str) -> tuple[Any, JobRow]:
    kb = await services.knowledge_bases.get(project, kb_name)
    async with services.ingest.db.connect() as conn:
        job = await jobs.get(conn, job_id)
    if job is None or job.kb_id != kb.id:
        raise NotFound(f"Job {job_id} of knowledge base {kb_name} does not exist", title="Job not found")
    return kb, job


@router.get("")
async def list_jobs(project_name: str, kb_name: str, services: ServicesDep,
                    limit: int = Query(50, ge=1, le=1000)) -> Any:
    kb = await services.knowledge_bases.get(project_name, kb_name)
    async with services.ingest.db.connect() as conn:
        rows = await jobs.list_for_kb(conn, kb.id, limit)
    return JSON([job_record(j, kb.project_name, kb.name) for j in rows])


@router.get("/{job_id}")
async def get_job(project_name: str, kb_name: str, job_id: str, services: ServicesDep) -> Any:
    kb, job = await _job(services, project_name, kb_name, job_id)
    return JSON(job_record(job, kb.project_name, kb.name))


@router.delete("/{job_id}")
async def cancel_job(project_name: str, kb_name: str, job_id: str, services: ServicesDep) -> Any:
    """Cancel: a queued job ends at once, a running one at its next progress check (its transaction is
    rolled back, so nothing of it is stored). A finished job is left as it is."""
    kb, job = await _job(services, project_name, kb_name, job_id)
    if job.state not in TERMINAL:
        async with services.ingest.db.transaction() as conn:
            job = await jobs.request_cancel(conn, job_id) or job
    return JSON(job_record(job, kb.project_name, kb.name), status_code=202 if job.state == "running" else 200)


@router.get("/{job_id}/events")
async def job_events(project_name: str, kb_name: str, job_id: str, services: ServicesDep) -> StreamingResponse:
    """Server-sent events: the job record each time it changes, until it ends."""
    kb, job = await _job(services, project_name, kb_name, job_id)

    async def events() -> AsyncIterator[str]:
        last: datetime | None = None
        current: JobRow | None = job
        while current is not None:
            if current.updated_at != last or current.state in TERMINAL:
                last = current.updated_at
                yield f"data: {json.dumps(job_record(current, kb.project_name, kb.name))}\n\n"
            if current.state in TERMINAL:
                return
            await asyncio.sleep(POLL_S)
            async with services.ingest.db.connect() as conn:
                current = await jobs.get(conn, job_id)

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
