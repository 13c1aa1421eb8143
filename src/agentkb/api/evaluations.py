"""`/api/projects/{project_name}/knowledge_bases/{kb_name}/evaluate` and `…/evaluations`: MindsDB's
`EVALUATE KNOWLEDGE_BASE` over REST, and the stored runs."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON, problems
from agentkb.service.retrieval import EvaluationRow, evaluate_input
from agentkb.timestamps import timestamp

router = APIRouter(prefix="/api/projects/{project_name}/knowledge_bases/{kb_name}", tags=["knowledge bases"])


class GenerateData(BaseModel):
    model_config = ConfigDict(extra="forbid")
    from_sql: str | None = Field(
        None,
        description="SELECT giving `content` and `id` columns to write questions from (default: the KB).",
    )
    count: int | None = Field(None, ge=1, le=10_000, description="Questions to generate (default 20).")


class EvaluateRequest(BaseModel):
    """EVALUATE KNOWLEDGE_BASE's USING parameters."""

    model_config = ConfigDict(extra="forbid")
    test_table: str = Field(
        description="`files.<name>` (or `<datasource>.<table>` to read): the test data, with `question` and "
        "`doc_id` columns (`question` and `answer` for llm_relevancy). Generated data replaces it."
    )
    generate_data: bool | GenerateData | None = Field(
        None,
        description="Generate questions with the LLM first: true (from the KB's chunks) or {from_sql, count}.",
    )
    evaluate: bool = Field(True, description="false: only generate the test data.")
    llm: dict[str, Any] | None = Field(
        None,
        description="The LLM ({provider, model_name, api_key, base_url}); default: the KB's reranking model.",
    )
    save_to: str | None = Field(None, description="`files.<name>`: append the result row there too.")
    version: Literal["doc_id", "llm_relevancy"] = "doc_id"
    top_k: int | None = Field(None, ge=1, le=100, description="Rows searched per question (default 20; 10).")


class EvaluationRecord(BaseModel):
    id: int
    knowledge_base: str
    version: str
    test_table: str | None
    params: dict[str, Any]
    metrics: dict[str, Any] = Field(
        description="doc_id: total, total_found, retrieved_in_top_10, cumulative_recall, avg_query_time, mrr, "
        "hit_at_k, recall_at_k, mrr_at_k; llm_relevancy: MindsDB's relevancy metrics."
    )
    results: list[dict[str, Any]] | None = Field(description="Per question (absent in lists).")
    created_at: str


class EvaluateResponse(BaseModel):
    generated: int | None = Field(description="Questions written to test_table (with generate_data).")
    test_table: str
    evaluation: EvaluationRecord | None = Field(description="The stored run (none with evaluate = false).")


def record(run: EvaluationRow, kb_name: str) -> dict[str, Any]:
    return {
        "id": run.id,
        "knowledge_base": kb_name,
        "version": run.version,
        "test_table": run.test_table,
        "params": run.params,
        "metrics": run.metrics,
        "results": run.results,
        "created_at": timestamp(run.created_at),
    }


@router.post("/evaluate", response_model=EvaluateResponse, responses=problems(400, 404, 413, 502))
async def evaluate_knowledge_base(
    project_name: str, kb_name: str, body: EvaluateRequest, services: ServicesDep
) -> Any:
    """Generate test questions with an LLM and/or score the KB's retrieval on a test table (hit@k, MRR,
    recall); the run is stored (`GET …/evaluations`)."""
    given = evaluate_input(body.model_dump(exclude_none=True))
    outcome = await services.evaluations.evaluate(project_name, kb_name, given)
    run = outcome.run
    return JSON(
        {
            "generated": outcome.generated,
            "test_table": body.test_table,
            "evaluation": record(run, kb_name) if run is not None else None,
        }
    )


@router.get("/evaluations", response_model=list[EvaluationRecord], responses=problems(400, 404))
async def list_evaluations(
    project_name: str,
    kb_name: str,
    services: ServicesDep,
    limit: int = Query(100, ge=1, le=100, description="Newest first."),
) -> Any:
    runs = await services.evaluations.list_runs(project_name, kb_name, limit)
    return JSON([record(run, kb_name) for run in runs])


@router.get("/evaluations/{evaluation_id}", response_model=EvaluationRecord, responses=problems(400, 404))
async def get_evaluation(project_name: str, kb_name: str, evaluation_id: int, services: ServicesDep) -> Any:
    return JSON(record(await services.evaluations.get_run(project_name, kb_name, evaluation_id), kb_name))
