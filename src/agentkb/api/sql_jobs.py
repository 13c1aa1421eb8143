"""`/api/projects/{project_name}/jobs`: MindsDB's JOBS over REST, as MindsDB's HTTP API has them (list,
create, one, delete, history), and agentkb's `POST …/jobs/{job_name}/run` (run now).

MindsDB's create reads `{"job": {name, query, start_at, end_at, schedule_str, if_query}}` (its OpenAPI file
shows the fields without the `job` wrapper: both are taken) and answers 200 with the job; its delete
answers 204. Dates are MindsDB's `YYYY-MM-DD HH:MM:SS` (UTC); records show them as agentkb's other records
do (`YYYY-MM-DD HH:MM:SS.ffffff`, UTC)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON, problems
from agentkb.errors import BadRequest
from agentkb.service.catalog import JobInput
from agentkb.service.types import SQLJobRow, SQLJobRunRow
from agentkb.timestamps import optional_timestamp, timestamp

router = APIRouter(prefix="/api/projects/{project_name}/jobs", tags=["jobs"])


class JobFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="The job's name, unique in its project.")
    query: str = Field(description="Its statements, separated by `;` (any statement the SQL endpoint runs).")
    if_query: str | None = Field(None, description="Run only when the last of these statements returns rows.")
    start_at: str | None = Field(None, description="First run (`YYYY-MM-DD[ HH:MM:SS]`, UTC; default now).")
    end_at: str | None = Field(None, description="No run after this date (with a schedule).")
    schedule_str: str | None = Field(
        None, description="`every [n] <unit>` (second, minute, hour, day, week, month); none: runs once."
    )


class JobRequest(BaseModel):
    """MindsDB's body, `{"job": {...}}`; the fields alone are taken too."""

    model_config = ConfigDict(extra="forbid")
    job: JobFields | None = None
    name: str | None = None
    query: str | None = None
    if_query: str | None = None
    start_at: str | None = None
    end_at: str | None = None
    schedule_str: str | None = None


class JobRecord(BaseModel):
    id: int
    name: str
    project: str
    start_at: str
    end_at: str | None
    next_run_at: str | None = Field(description="The next planned run (none: a run-once job now running).")
    schedule_str: str | None
    query: str
    if_query: str | None
    variables: dict[str, Any] = Field(description="The LAST values the job keeps, by condition.")
    running: bool = Field(description="A run of it is in progress.")


class JobRunRecord(BaseModel):
    id: int
    name: str
    project: str
    tick_at: str = Field(description="The tick this run served.")
    run_start: str
    run_end: str | None
    state: str = Field(description="running, succeeded, failed, skipped (its IF found no rows), handed_back.")
    error: str | None
    query: str | None = Field(description="The statements it ran, LAST resolved.")
    ingest_jobs: list[str] = Field(description="The ingestion jobs its inserts ran as.")


def job_record(job: SQLJobRow) -> dict[str, Any]:
    return {
        "id": job.id,
        "name": job.name,
        "project": job.project_name,
        "start_at": timestamp(job.start_at),
        "end_at": optional_timestamp(job.end_at),
        "next_run_at": optional_timestamp(job.next_run_at),
        "schedule_str": job.schedule_str,
        "query": job.query,
        "if_query": job.if_query,
        "variables": job.variables,
        "running": job.running_run_id is not None,
    }


def run_record(run: SQLJobRunRow) -> dict[str, Any]:
    return {
        "id": run.id,
        "name": run.job_name,
        "project": run.project_name,
        "tick_at": timestamp(run.tick_at),
        "run_start": timestamp(run.run_start),
        "run_end": optional_timestamp(run.run_end),
        "state": run.state,
        "error": run.error,
        "query": run.query,
        "ingest_jobs": list(run.ingest_job_ids),
    }


@router.get("", response_model=list[JobRecord], responses=problems(400, 404))
async def list_jobs(project_name: str, services: ServicesDep) -> Any:
    return JSON([job_record(job) for job in await services.sql_jobs.list(project_name)])


@router.post("", response_model=JobRecord, responses=problems(400, 404, 409))
async def create_job(project_name: str, body: JobRequest, services: ServicesDep) -> Any:
    fields = body.job or body
    if fields.name is None or fields.query is None:
        raise BadRequest(
            'Give the job as {"job": {"name": ..., "query": ..., ...}}', title="Missing parameter"
        )
    given = JobInput(
        name=fields.name,
        query=fields.query,
        start=fields.start_at,
        end=fields.end_at,
        every=fields.schedule_str,
        if_query=fields.if_query,
    )
    return JSON(job_record(await services.sql_jobs.create(project_name, given)))


@router.get("/{job_name}", response_model=JobRecord, responses=problems(400, 404))
async def get_job(project_name: str, job_name: str, services: ServicesDep) -> Any:
    return JSON(job_record(await services.sql_jobs.get(project_name, job_name)))


@router.delete("/{job_name}", status_code=204, responses=problems(400, 404))
async def delete_job(project_name: str, job_name: str, services: ServicesDep) -> Response:
    await services.sql_jobs.drop(project_name, job_name)
    return Response(status_code=204)


@router.get("/{job_name}/history", response_model=list[JobRunRecord], responses=problems(400, 404))
async def job_history(
    project_name: str,
    job_name: str,
    services: ServicesDep,
    limit: int = Query(100, ge=1, le=1000, description="Newest first."),
) -> Any:
    """The job's runs, newest first (404 for a job that does not exist now; SQL's `jobs_history` keeps the
    runs of dropped jobs, by name)."""
    return JSON([run_record(run) for run in await services.sql_jobs.runs(project_name, job_name, limit)])


@router.post("/{job_name}/run", response_model=JobRecord, responses=problems(400, 404))
async def run_job(project_name: str, job_name: str, services: ServicesDep) -> Any:
    """Make the job due now (agentkb's): a scheduler runs it within moments; its schedule goes on after."""
    return JSON(job_record(await services.sql_jobs.run_now(project_name, job_name)))
