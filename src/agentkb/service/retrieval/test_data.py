"""EVALUATE's test data: one question/answer pair per sampled row, written by an LLM (MindsDB's prompt), or,
when the LLM is the keyless `extractive` default, taken from the row's text without one
(`kb.evaluate.extractive_question`: a sentence of the passage). Also the LLM an evaluation calls, built once
its configuration is known (`llm_model`), with the refusal for `extractive` where a real LLM is needed."""

from __future__ import annotations

import asyncio
from typing import Any

from agentkb.agents.providers import (
    MissingCredentials,
    ModelClient,
    ProviderContext,
    ask_model,
    build_model,
    model_settings,
)
from agentkb.errors import BadRequest, UpstreamError
from agentkb.kb import evaluate as metrics
from agentkb.secrecy import mask_text, secret_values

GENERATION_CONCURRENCY = 4
EXTRACTIVE = "extractive"


def is_extractive(llm: dict[str, Any]) -> bool:
    return llm.get("provider") == EXTRACTIVE


def llm_model(llm: dict[str, Any], purpose: str, http_client: ModelClient) -> Any:
    """The pydantic-ai model of `llm`; 400 for the keyless `extractive` model (it cannot `purpose`) or
    missing credentials."""
    if is_extractive(llm):
        raise BadRequest(
            f"EVALUATE needs an LLM to {purpose}, and the default model is 'extractive' (no LLM): give "
            "llm = {'provider': 'openai', 'model_name': …, 'api_key': …} in USING, set a reranking_model "
            "on the knowledge base or a default model (AGENTKB_DEFAULT_MODEL); or use version = 'doc_id'",
            title="No LLM",
        )
    try:
        return build_model(ProviderContext(model=llm, http_client=http_client.client()))
    except MissingCredentials as exc:
        raise BadRequest(str(exc), title="No LLM") from exc


async def _llm_pairs(
    texts: list[str], llm: dict[str, Any], http_client: ModelClient
) -> list[tuple[str, str] | ValueError]:
    model = llm_model(llm, "generate test data", http_client)
    settings = model_settings(llm)
    gate = asyncio.Semaphore(GENERATION_CONCURRENCY)

    async def ask(text: str) -> tuple[str, str] | ValueError:
        async with gate:
            try:
                answer = await ask_model(
                    model, metrics.qa_user_message(text), settings, system=metrics.GENERATE_QA_SYSTEM_PROMPT
                )
            except Exception as exc:  # the providers raise many kinds of errors
                raise UpstreamError(
                    mask_text(
                        f"The LLM {llm.get('model_name')!r} failed to generate test data: "
                        f"{type(exc).__name__}: {exc}",
                        secret_values(llm),
                    ),
                    title="LLM error",
                ) from exc
        try:
            return metrics.parse_question_answer(answer)
        except ValueError as exc:
            return exc

    return list(await asyncio.gather(*(ask(text) for text in texts)))


async def generate(
    sample: list[dict[str, Any]], llm: dict[str, Any], version: str, http_client: ModelClient
) -> list[dict[str, Any]]:
    """The test rows (MindsDB's columns: text, question, answer, doc_id; `id` for `llm_relevancy`) for the
    sampled rows (`chunk_content`, `id`)."""
    if version == metrics.DOC_ID and sample and "id" not in sample[0]:
        raise BadRequest("'id' column is required for generating test dataset")
    texts = [str(row.get("chunk_content") or "") for row in sample]
    if is_extractive(llm):
        answers: list[tuple[str, str] | ValueError | None] = [metrics.extractive_question(t) for t in texts]
    else:
        answers = list(await _llm_pairs(texts, llm, http_client))
        errors = [a for a in answers if isinstance(a, ValueError)]
        if len(errors) > metrics.MAX_GENERATION_ERRORS:
            raise UpstreamError(f"The LLM's test data could not be read: {errors[-1]}", title="LLM error")
    out = []
    for row, qa in zip(sample, answers, strict=True):
        if qa is None or isinstance(qa, ValueError):
            continue
        record = {"text": row.get("chunk_content"), "question": qa[0], "answer": qa[1]}
        if version == metrics.DOC_ID:
            record["doc_id"] = row["id"]
        out.append(record)
    if not out:
        if is_extractive(llm):
            raise BadRequest("No data in generated test dataset: the sampled rows have no text to ask about")
        raise UpstreamError("No data in generated test dataset", title="LLM error")
    if version != metrics.DOC_ID:
        out = [{**r, "id": i} for i, r in enumerate(out)]
    return out
