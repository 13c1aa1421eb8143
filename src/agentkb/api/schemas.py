"""Request and response bodies of the resource endpoints, and the row → JSON record encoders."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentkb.service.catalog import fit_to_show
from agentkb.service.types import AgentRow, JobRow, KnowledgeBaseRow, Project
from agentkb.timestamps import optional_timestamp, timestamp

Id = int | str


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ModelConfig(BaseModel):
    model_config = ConfigDict(extra="allow")
    provider: str | None = Field(
        None, description="extractive, openai, anthropic, google, ollama, vllm, nvidia_nim, litellm or writer"
    )
    model_name: str | None = None
    api_key: str | None = Field(None, description="Provider credential; echoed back in agent records.")


class AgentData(BaseModel):
    model_config = ConfigDict(extra="forbid")
    knowledge_bases: list[str] | None = Field(None, description="`<project>.<kb>` or `<project>.*`")
    tables: list[str] | None = Field(None, description="`<data_source>.<table>` or `<data_source>.*`")


class AgentFields(_Lenient):
    """All optional; `null` means "not sent". `model_name`/`provider`/`params` are the MindsDB SDK's."""

    name: str | None = None
    model: ModelConfig | None = None
    data: AgentData | None = None
    prompt_template: str | None = None
    model_name: str | None = None
    provider: str | None = None
    params: dict[str, Any] | None = None
    id: Id | None = Field(None, description="Ignored: the service assigns ids.")
    project_id: Id | None = Field(None, description="Ignored: the path names the project.")


class AgentRequest(BaseModel):
    agent: AgentFields


class AgentRecord(BaseModel):
    id: int
    name: str
    project_id: int
    created_at: str
    updated_at: str
    data: dict[str, Any]
    model: dict[str, Any]
    prompt_template: str | None
    params: dict[str, Any] | None = None


def agent_record(row: AgentRow) -> dict[str, Any]:
    row = fit_to_show(row, echo_model=True)  # only `model` is echoed whole (spec 2.1)
    record: dict[str, Any] = {
        "id": row.id,
        "name": row.name,
        "project_id": row.project_id,
        "created_at": timestamp(row.created_at),
        "updated_at": timestamp(row.updated_at),
        "data": row.data,
        "model": row.model,
        "prompt_template": row.prompt_template,
    }
    if row.params:
        record["params"] = row.params
    return record


class KnowledgeBaseFields(_Lenient):
    name: str | None = None
    embedding_model: dict[str, Any] | str | None = Field(
        None,
        description="{provider: local|openai|ollama|azure_openai|google|bedrock|snowflake, model_name, "
        "api_key?, base_url?, dimensions?, ...}",
    )
    reranking_model: dict[str, Any] | bool | None = None
    metadata_columns: list[str] | None = None
    content_columns: list[str] | None = None
    id_column: str | None = None
    params: dict[str, Any] | None = None
    preprocessing: dict[str, Any] | None = None
    storage: dict[str, Any] | None = Field(
        None,
        description="Refused (400): chunks always live in agentkb's own pgvector; leave it out.",
    )


class KnowledgeBaseRequest(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "knowledge_base": {
                        "name": "docs_kb",
                        "embedding_model": {"provider": "local", "model_name": "all-MiniLM-L6-v2"},
                        "metadata_columns": ["category"],
                        "content_columns": ["body"],
                        "id_column": "doc_id",
                    }
                }
            ]
        }
    )
    knowledge_base: KnowledgeBaseFields


class KnowledgeBaseRecord(BaseModel):
    id: int
    name: str
    project_id: int
    project_name: str
    vector_database: str
    vector_database_table: str
    updated_at: str
    created_at: str
    query_id: int | str | None
    embedding_model: dict[str, Any] | None
    reranking_model: dict[str, Any] | None
    metadata_columns: list[str] | None
    content_columns: list[str] | None
    id_column: str | None
    params: dict[str, Any]
    document_count: int | None = Field(None, description="GET of one knowledge base only.")
    chunk_count: int | None = Field(None, description="GET of one knowledge base only.")
    endpoints: dict[str, str] | None = Field(
        None,
        description="An import's answer only: each model and the URL it calls with the keys given (`local`: "
        "computed in the server, no request).",
    )


def kb_record(row: KnowledgeBaseRow) -> dict[str, Any]:
    row = fit_to_show(row)
    return {
        "id": row.id,
        "name": row.name,
        "project_id": row.project_id,
        "project_name": row.project_name,
        "vector_database": row.params.get("default_vector_storage", "agentkb_pgvector"),
        "vector_database_table": row.storage_table,
        "updated_at": timestamp(row.updated_at),
        "created_at": timestamp(row.created_at),
        "query_id": None,
        "embedding_model": row.embedding_model,
        "reranking_model": row.reranking_model,
        "metadata_columns": row.metadata_columns,
        "content_columns": row.content_columns,
        "id_column": row.id_column,
        "params": row.params,
    }


class ProjectRecord(BaseModel):
    name: str


class ProjectRequest(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "support"}]})
    name: str


def project_record(project: Project) -> dict[str, Any]:
    return {"name": project.name}


class InsertFields(_Lenient):
    rows: list[dict[str, Any]] | None = Field(None, description="Rows to insert (column name → value).")
    query: str | None = Field(None, description="A SELECT over one data source: `SELECT ... FROM ds.table`.")
    files: list[Any] | None = None
    urls: list[str] | None = None
    limit: int | None = None
    crawl_depth: int | None = None
    filters: dict[str, Any] | list[str] | None = None
    params: dict[str, Any] | None = None
    preprocessing: dict[str, Any] | None = None
    mirror: bool | None = Field(
        None,
        description="With `query` only: once the whole SELECT is stored, delete the knowledge base's "
        "documents it did not return (in the same transaction), so the KB mirrors the query. Refused "
        "(400) with rows, files or urls, and with a LIMIT, OFFSET or LAST in the query.",
    )
    # MindsDB's documented ALTER body (docs/rest/knowledge_bases/alter.mdx): the settings beside the data
    # rather than in `params`; either way they change the KB as ALTER KNOWLEDGE_BASE does
    embedding_model: dict[str, Any] | str | None = Field(
        None,
        description='ALTER: keys merged into the stored embedding model (`"******"` keeps a stored key; a new '
        "`base_url` needs the key again). The same as `params.embedding_model`.",
    )
    reranking_model: dict[str, Any] | bool | None = Field(
        None, description="ALTER: keys merged into the stored reranking model; `false` removes it."
    )
    content_columns: list[str] | None = Field(None, description="ALTER: the KB's content columns.")
    metadata_columns: list[str] | None = Field(None, description="ALTER: the KB's metadata columns.")
    id_column: str | None = Field(None, description="ALTER: the KB's id column.")


class InsertRequest(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "knowledge_base": {
                        "rows": [
                            {"doc_id": "faq-1", "body": "Refunds take five days.", "category": "billing"},
                            {"doc_id": "faq-2", "body": "The office opens at nine.", "category": "office"},
                        ]
                    }
                },
                {
                    "knowledge_base": {
                        "embedding_model": {"api_key": "sk-new"},
                        "reranking_model": {
                            "provider": "openai",
                            "model_name": "gpt-4o",
                            "api_key": "sk-xxx",
                        },
                        "content_columns": ["notes"],
                        "metadata_columns": ["product"],
                        "id_column": "order_id",
                    }
                },
            ]
        }
    )
    knowledge_base: InsertFields


class FilterCondition(BaseModel):
    key: str
    op: str = "="
    value: Any = None


class SearchRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"query": "how long do refunds take", "limit": 5, "filters": {"category": "billing"}},
                {"query": "opening hours", "hybrid_search_alpha": 0.7, "relevance_threshold": 0.2},
            ]
        },
    )
    query: str | None = Field(None, description="Text to search for; omit to list chunks.")
    limit: int | None = Field(
        None, ge=0, description="Rows to return (default 10, at most 100 with a query)."
    )
    offset: int = Field(0, ge=0, le=1_000_000)
    filters: dict[str, Any] | list[FilterCondition] | None = Field(
        None,
        description="{key: value} (a list value means IN) or [{key, op, value}]; keys are metadata keys, "
        "`id` or `chunk_id`.",
    )
    hybrid_search: bool = Field(True, description="Fuse vector and full-text rankings; false: vector only.")
    hybrid_search_alpha: float | None = Field(None, ge=0, le=1, description="Weight of the vector ranking.")
    fusion_k: int | None = Field(None, ge=1, le=1000, description="Reciprocal rank fusion constant k.")
    reranking: bool = Field(True, description="Rerank with the KB's reranking_model, when it has one.")
    relevance_threshold: float | None = Field(None, ge=0, le=1)


class DeleteDocumentsRequest(BaseModel):
    """The optional body of `DELETE …/knowledge_bases/{kb}`: without it the whole knowledge base is dropped."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"ids": ["faq-1", "faq-2"]},
                {"filters": [{"key": "category", "op": "=", "value": "office"}]},
            ]
        },
    )
    ids: list[Any] | None = Field(None, description="Document ids to delete.")
    filters: dict[str, Any] | list[FilterCondition] | None = None


def job_record(job: JobRow, project: str, kb: str) -> dict[str, Any]:
    end = job.finished_at
    duration = (end - job.started_at).total_seconds() if end and job.started_at else None
    return {
        "id": job.id,
        "project": project,
        "knowledge_base": kb,
        "mode": job.mode,
        "state": job.state,
        "counts": job.counts,
        "errors": job.errors,
        "error": job.error,
        "worker": job.worker,
        "attempts": job.attempts,
        "cancel_requested": job.cancel_requested,
        "created_at": timestamp(job.created_at),
        "started_at": optional_timestamp(job.started_at),
        "finished_at": optional_timestamp(end),
        "duration_s": round(duration, 3) if duration is not None else None,
    }


class DeletedDocuments(BaseModel):
    deleted_documents: int
    deleted_chunks: int


class InsertQueued(BaseModel):
    job_id: str
    state: str = Field(description="queued or running")


class JobRecord(BaseModel):
    id: str
    project: str
    knowledge_base: str
    mode: str
    state: str = Field(description="queued, running, succeeded, failed or cancelled")
    counts: dict[str, Any] = Field(
        description="The job's progress counters so far (items_total, items_failed, ...)."
    )
    errors: list[dict[str, Any]] = Field(
        description="Items that failed without failing the job, each {item, error} (a crawled page, a file)."
    )
    error: str | None = Field(description="Why the job failed, when it did.")
    worker: str | None = Field(description="The process that runs (or last ran) the job.")
    attempts: int = Field(
        description="Runs started: a job whose worker went silent is taken over and run again."
    )
    cancel_requested: bool
    created_at: str
    started_at: str | None
    finished_at: str | None
    duration_s: float | None


# --- querying agents (spec 4.4, 6) ----------------------------------------------------------------


class CompletionMessage(BaseModel):
    role: Literal["assistant"]
    content: str
    trace_id: str
    context: list[dict[str, Any]] = Field(description="Retrieved passages: {page_content, metadata}.")
    sources: list[dict[str, str | None]] = Field(description="Citations: {kind, name, chunk_id, source}.")


class CompletionResponse(BaseModel):
    message: CompletionMessage


class TraceRecord(BaseModel):
    trace_id: str
    agent_id: int
    agent_name: str
    project_id: int
    question: str
    answer: str | None
    status: str = Field(description="running, completed, max_steps, error, timeout or cancelled")
    error: str | None
    error_type: str | None
    model: dict[str, Any] | None
    steps: list[dict[str, Any]]
    usage: dict[str, Any]
    started_at: str | None
    finished_at: str | None
    duration_ms: float | None


class ToolCall(BaseModel):
    tool: str
    tool_input: str
    log: str


class ToolStep(BaseModel):
    action: ToolCall
    observation: str


class ChunkMessage(BaseModel):
    content: str


class StartChunk(BaseModel):
    type: Literal["start"]
    prompt: str
    trace_id: str


class ActionChunk(BaseModel):
    actions: list[ToolCall]
    messages: list[ChunkMessage]
    trace_id: str


class StepChunk(BaseModel):
    steps: list[ToolStep]
    messages: list[ChunkMessage]
    trace_id: str


class OutputChunk(BaseModel):
    output: str
    messages: list[ChunkMessage]
    trace_id: str
    sources: list[dict[str, str | None]]


class ErrorChunk(BaseModel):
    type: Literal["error"]
    content: str
    error_type: str
    trace_id: str


class EndChunk(BaseModel):
    type: Literal["end"]


CompletionChunk = StartChunk | ActionChunk | StepChunk | OutputChunk | ErrorChunk | EndChunk
"""One `data:` chunk of `/completions/stream`."""
