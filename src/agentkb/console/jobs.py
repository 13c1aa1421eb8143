"""MindsDB's JOBS in the console: the project's jobs (schedule, next run, last run, running), create one
(statements, START, END, `every n unit`, IF), a job's page (statements, IF, LAST values, recent runs), run
now and delete. Pages with a run in progress or due poll themselves (htmx) until it ends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Depends, Form, Request, Response

from agentkb.console import forms
from agentkb.console.render import ConsoleRoute, page, see_other, services_of
from agentkb.console.session import PREFIX, check_csrf
from agentkb.secrecy import mask_text
from agentkb.service.catalog import JobInput
from agentkb.service.types import SQLJobRow, SQLJobRunRow

router = APIRouter(prefix=f"{PREFIX}/projects/{{project}}/jobs", route_class=ConsoleRoute)
RUNS_SHOWN = 20
UNITS = ("seconds", "minutes", "hours", "days", "weeks", "months")
DUE_SOON = timedelta(seconds=5)  # a job due this soon counts as about to run: its page polls


def jobs_url(project: str, job: str | None = None) -> str:
    base = f"{PREFIX}/projects/{project}/jobs"
    return f"{base}/{job}" if job else base


def when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


def run_view(run: SQLJobRunRow) -> dict[str, Any]:
    return {
        "id": run.id,
        "tick_at": when(run.tick_at),
        "run_start": when(run.run_start),
        "run_end": when(run.run_end),
        "state": run.state,
        "error": mask_text(run.error or ""),
        "query": mask_text(run.query or ""),
        "ingest_jobs": run.ingest_job_ids,
    }


def job_view(job: SQLJobRow, last: SQLJobRunRow | None = None) -> dict[str, Any]:
    """What a page shows of a job (its statements masked as any text that may hold a secret)."""
    soon = job.next_run_at is not None and job.next_run_at <= datetime.now(UTC) + DUE_SOON
    return {
        "name": job.name,
        "schedule": job.schedule_str or "once",
        "start_at": when(job.start_at),
        "end_at": when(job.end_at),
        "next_run_at": when(job.next_run_at),
        "query": mask_text(job.query),
        "if_query": mask_text(job.if_query) if job.if_query else "",
        "variables": job.variables,
        "running": job.running_run_id is not None,
        "live": job.running_run_id is not None or soon,
        "last": run_view(last) if last is not None else None,
    }


async def _runs(request: Request, project: str, job: SQLJobRow, limit: int) -> list[SQLJobRunRow]:
    """The job's runs, newest first (not those of a dropped job of the same name)."""
    return await services_of(request).sql_jobs.runs(project, job.name, limit)


@router.get("")
async def list_jobs(request: Request, project: str) -> Response:
    rows = []
    for job in await services_of(request).sql_jobs.list(project):
        last = await _runs(request, project, job, 1)
        rows.append(job_view(job, last[0] if last else None))
    return await page(
        request,
        "jobs.html",
        project=project,
        section="jobs",
        jobs=rows,
        live=any(j["live"] for j in rows),
        units=UNITS,
    )


@router.post("", dependencies=[Depends(check_csrf)])
async def create_job(
    request: Request,
    project: str,
    name: str = Form(""),
    query: str = Form(""),
    start: str = Form(""),
    end: str = Form(""),
    every_count: str = Form(""),
    every_unit: str = Form(""),
    if_query: str = Form(""),
) -> Response:
    """Create a job; its statements, dates and schedule are checked by the service (400 in the page's
    alert area). No unit: the job runs once."""
    unit = forms.text(every_unit)
    given = JobInput(
        name=forms.text(name) or "",
        query=forms.text(query) or "",
        start=forms.text(start),
        end=forms.text(end),
        every=f"{forms.text(every_count) or 1} {unit}" if unit else None,
        if_query=forms.text(if_query),
    )
    job = await services_of(request).sql_jobs.create(project, given)
    return see_other(jobs_url(project, job.name))


@router.get("/{job}")
async def job_page(request: Request, project: str, job: str) -> Response:
    row = await services_of(request).sql_jobs.get(project, job)
    runs = await _runs(request, project, row, RUNS_SHOWN)
    return await page(
        request,
        "job.html",
        project=project,
        section="jobs",
        job=job_view(row, runs[0] if runs else None),
        runs=[run_view(r) for r in runs],
    )


@router.post("/{job}/run", dependencies=[Depends(check_csrf)])
async def run_now(request: Request, project: str, job: str, back: str = Form("")) -> Response:
    """Make the job due now; back to the list (asked from it, or a run-once job, which is gone after its
    run) or to the job's page, which follows the run."""
    row = await services_of(request).sql_jobs.run_now(project, job)
    to_list = back == "list" or row.schedule_str is None
    return see_other(jobs_url(project) if to_list else jobs_url(project, row.name))


@router.post("/{job}/delete", dependencies=[Depends(check_csrf)])
async def delete_job(request: Request, project: str, job: str) -> Response:
    """Drop the job (a run in progress ends at its next heartbeat; its runs stay in `jobs_history`)."""
    await services_of(request).sql_jobs.drop(project, job)
    return see_other(jobs_url(project))
