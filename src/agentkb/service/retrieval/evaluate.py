"""Evaluating a knowledge base (`EVALUATE KNOWLEDGE_BASE`, `POST …/knowledge_bases/{kb}/evaluate`), as MindsDB
26.1's `EvaluateBase.run_evaluate` does it:

1. with `generate_data` (true, or `{from_sql, count}`), sample `count` rows (default 20) of the SQL's result
   (`content`, `id`) or of the KB's own chunks, ask the LLM for one question/answer pair per row, and write
   the test data (MindsDB's columns: text, question, answer, doc_id) to `test_table`, replacing it;
2. unless `evaluate = false`, read `test_table`, search the KB with each question (its own search: hybrid,
   reranked if it has a reranking model) and score the results (kb/evaluate.py);
3. store the run (metrics and per-question results, `kb_evaluations`) and append its answer row to
   `save_to`, if given.

The LLM is `llm` from USING, else the KB's reranking model, over the default model (MindsDB: `default_llm`;
agentkb's `AGENTKB_DEFAULT_MODEL`) when they share a provider. With the keyless default (`extractive`, no
LLM at all) each question is a sentence of its row's text (`test_data.py`); `llm_relevancy`, which needs an
LLM to score passages, is refused (400) before anything is written. Tables are read and written through
`Tables` (the SQL endpoint's view: `files.<name>` and data sources), so this module holds no SQL.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agentkb.agents.providers import ModelClient
from agentkb.errors import BadRequest, NotFound
from agentkb.kb import evaluate as metrics
from agentkb.kb import rerank
from agentkb.kb.search import SearchOptions
from agentkb.secrecy import drop_carried, mask_secrets
from agentkb.service.platform import access
from agentkb.service.retrieval.search import SearchService
from agentkb.service.retrieval.test_data import generate, is_extractive, llm_model
from agentkb.storage import evaluations as repo
from agentkb.storage.db import Database
from agentkb.storage.evaluations import EvaluationRow
from agentkb.storage.knowledge_bases import KnowledgeBaseRow
from agentkb.validation import check_storable

__all__ = [
    "EvaluateInput",
    "EvaluateService",
    "EvaluationOutcome",
    "EvaluationRow",
    "Tables",
    "evaluate_input",
]

PARAMETERS = ("test_table", "generate_data", "evaluate", "llm", "save_to", "version", "top_k")
MAX_LISTED = 100


class Tables(Protocol):
    """Tables as the SQL endpoint sees them (`files.<name>`, `<datasource>.<table>`)."""

    async def select(self, sql: str, db: str, default_limit: int) -> list[dict[str, Any]]: ...

    async def read(self, table: Sequence[str], db: str) -> list[dict[str, Any]]: ...

    async def write(self, table: Sequence[str], rows: list[dict[str, Any]], *, replace: bool) -> None: ...


@dataclass(frozen=True, slots=True)
class EvaluateInput:
    test_table: tuple[str, ...] | None = None
    generate_data: dict[str, Any] | None = None  # None: no generation; {}: from the KB's chunks
    evaluate: bool = True
    llm: dict[str, Any] | None = None
    save_to: tuple[str, ...] | None = None
    version: str = metrics.DOC_ID
    top_k: int | None = None


@dataclass(frozen=True, slots=True)
class EvaluationOutcome:
    generated: int | None  # questions written to the test table, when generating
    run: EvaluationRow | None  # None with `evaluate = false`
    answer: dict[str, Any] | None  # MindsDB's answer row: the metrics, id, name, created_at


def _table(value: Any, key: str) -> tuple[str, ...]:
    parts = value.split(".") if isinstance(value, str) else value
    if not isinstance(parts, list | tuple) or not all(isinstance(p, str) and p for p in parts) or not parts:
        raise BadRequest(f"EVALUATE parameter '{key}' must name a table: <database>.<table>")
    check_storable(list(parts), key)
    if len(parts) < 2:
        raise BadRequest(
            f"Can't find database, table name must have at least 2 parts: {'.'.join(parts)} "
            f"(write {key} = files.{parts[0]})"
        )
    return tuple(parts)


def evaluate_input(params: Mapping[str, Any]) -> EvaluateInput:
    """EVALUATE's USING parameters (lower-cased keys; a table as `db.table` text or its parts)."""
    check_storable(dict(params), "EVALUATE parameters")
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise BadRequest(f"Unknown EVALUATE parameter {unknown[0]!r}; use: {', '.join(PARAMETERS)}")
    generate = params.get("generate_data")
    if generate is True:
        generate = {}
    elif generate is False or generate is None:
        generate = None
    elif not isinstance(generate, dict) or set(generate) - {"from_sql", "count"}:
        raise BadRequest(
            "generate_data must be true or {'from_sql': 'SELECT content, id FROM …', 'count': n}"
        )
    if generate is not None:
        count = generate.get("count", metrics.DEFAULT_QUESTION_COUNT)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise BadRequest("generate_data.count must be a positive integer")
        if "from_sql" in generate and not isinstance(generate["from_sql"], str):
            raise BadRequest("generate_data.from_sql must be a SELECT statement (text)")
    evaluate = params.get("evaluate", True)
    llm = params.get("llm")
    version = params.get("version", metrics.DOC_ID)
    top_k = params.get("top_k")
    if not isinstance(evaluate, bool):
        raise BadRequest("evaluate must be true or false")
    if llm is not None and not isinstance(llm, dict):
        raise BadRequest("llm must be an object: {'provider': …, 'model_name': …, 'api_key': …}")
    if version not in metrics.VERSIONS:
        raise BadRequest(f"Version of evaluator is not implemented: {version}; use doc_id or llm_relevancy")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise BadRequest(f"top_k must be an integer from 1 to {metrics.MAX_TOP_K}")
    if top_k is not None and top_k > metrics.MAX_TOP_K:
        raise BadRequest(f"top_k must be an integer from 1 to {metrics.MAX_TOP_K}")
    if "test_table" not in params or params["test_table"] is None:
        raise BadRequest(
            'The table with test data has to be defined in the "test_table" parameter '
            "(files.<name>: generated questions are written there, or existing ones read from it)"
        )
    return EvaluateInput(
        test_table=_table(params["test_table"], "test_table"),
        generate_data=generate,
        evaluate=evaluate,
        llm=llm,
        save_to=_table(params["save_to"], "save_to") if params.get("save_to") is not None else None,
        version=version,
        top_k=top_k,
    )


class EvaluateService:
    def __init__(
        self,
        db: Database,
        search: SearchService,
        default_model: dict[str, Any],
        http_client: ModelClient,
        tables: Tables,
    ) -> None:
        self.db = db
        self.search = search
        self.default_model = default_model
        self.http_client = http_client
        self.tables = tables  # the test tables, as the SQL endpoint sees them

    # --- the run ---------------------------------------------------------------------------------------
    async def evaluate(
        self, project: str, kb_name: str, given: EvaluateInput, db: str | None = None
    ) -> EvaluationOutcome:
        access.require_write("evaluating a knowledge base")  # it stores a run, and may write test tables
        access.require_project(project)
        tables = self.tables
        kb = await self.search.knowledge_base(project, kb_name)
        context = db or kb.project_name
        assert given.test_table is not None
        llm = self.llm_for(given.llm, kb)
        if given.evaluate and given.version == metrics.LLM_RELEVANCY and is_extractive(llm):
            llm_model(llm, "score the retrieved passages", self.http_client)  # 400 before anything is written
        generated = None
        if given.generate_data is not None:
            sample = await self._sample(kb, given.generate_data, context, tables)
            test_rows = await generate(sample, llm, given.version, self.http_client)
            await tables.write(given.test_table, test_rows, replace=True)
            generated = len(test_rows)
        if not given.evaluate:
            return EvaluationOutcome(generated, None, None)
        rows = await tables.read(given.test_table, context)
        top_k = given.top_k or metrics.TOP_K[given.version]
        if given.version == metrics.DOC_ID:
            summary, results = await self._doc_id(kb, rows, top_k)
        else:
            summary, results = await self._relevancy(kb, rows, top_k, llm)
        params = {
            "test_table": ".".join(given.test_table),
            "generate_data": given.generate_data,
            "evaluate": True,
            "llm": mask_secrets(llm),
            "save_to": ".".join(given.save_to) if given.save_to else None,
            "version": given.version,
            "top_k": top_k,
        }
        check_storable(results, "test data")
        async with self.db.transaction() as conn:
            run = await repo.insert(
                conn,
                {
                    "knowledge_base_id": kb.id,
                    "version": given.version,
                    "test_table": params["test_table"],
                    "params": params,
                    "metrics": summary,
                    "results": results,
                },
            )
        answer = {**summary, "id": run.id, "name": kb.name, "created_at": run.created_at}
        if given.save_to:
            await tables.write(given.save_to, [answer], replace=False)
        return EvaluationOutcome(generated, run, answer)

    def llm_for(self, given: dict[str, Any] | None, kb: KnowledgeBaseRow) -> dict[str, Any]:
        """`llm`, else the KB's reranking model, over the default model when the provider is the same."""
        chosen = given
        if chosen is None and kb.reranking_model:
            chosen = self.search.box.reveal(kb.reranking_model, f"knowledge base {kb.name} reranking_model")
        base = dict(self.default_model)
        if not chosen:
            return base
        provider = chosen.get("provider")
        if provider is None and base.get("provider") == "extractive":
            return {"provider": "openai", **chosen}  # MindsDB's LLMClient: openai unless told otherwise
        if provider is not None and provider != base.get("provider"):
            return dict(chosen)  # another provider: the default's key and URL are not for it
        return drop_carried(base, {**base, **chosen}, chosen)  # the default's key stays with its server

    # --- generating test data --------------------------------------------------------------------------
    async def _sample(
        self, kb: KnowledgeBaseRow, generate: dict[str, Any], db: str, tables: Tables
    ) -> list[dict[str, Any]]:
        if "from_sql" in generate:
            rows = await tables.select(generate["from_sql"], db, metrics.DEFAULT_SAMPLE_SIZE)
            if rows and "content" not in rows[0]:
                raise BadRequest(f"`content` column isn't found in provided sql: {generate['from_sql']}")
            rows = [{**r, "chunk_content": r.get("content")} for r in rows]
        else:
            hits = await self.search.search_kb(kb, SearchOptions(limit=metrics.DEFAULT_SAMPLE_SIZE))
            rows = [{"chunk_content": h.chunk_content, "id": h.id} for h in hits]
        count = min(int(generate.get("count", metrics.DEFAULT_QUESTION_COUNT)), len(rows))
        return random.sample(rows, count)

    # --- scoring -----------------------------------------------------------------------------------------
    @staticmethod
    def _questions(rows: list[dict[str, Any]], needed: tuple[str, ...]) -> None:
        columns = set(rows[0]) if rows else set()
        if set(needed) - columns:
            raise BadRequest(
                f"Test data must contain {' and '.join(repr(c) for c in needed)} columns. "
                f"Columns in the provided test data: {sorted(columns)}"
            )

    async def _timed_search(self, kb: KnowledgeBaseRow, question: Any, top_k: int) -> tuple[list[Any], float]:
        if question is None or str(question).strip() == "":
            raise BadRequest("A row of the test table has no question")
        started = time.perf_counter()
        hits = await self.search.search_kb(kb, SearchOptions(query=str(question), limit=top_k))
        return hits, time.perf_counter() - started

    async def _doc_id(
        self, kb: KnowledgeBaseRow, rows: list[dict[str, Any]], top_k: int
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        self._questions(rows, ("question", "doc_id"))
        results = []
        for row in rows:
            hits, seconds = await self._timed_search(kb, row["question"], top_k)
            retrieved = [metrics.relevant_ids(h.id)[0] if h.id is not None else "" for h in hits]
            results.append(
                metrics.DocResult(
                    str(row["question"]), metrics.relevant_ids(row["doc_id"]), retrieved, seconds
                )
            )
        try:
            summary = metrics.summarize_doc_id(results, top_k)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        return summary, [r.record() for r in results]

    async def _relevancy(
        self, kb: KnowledgeBaseRow, rows: list[dict[str, Any]], top_k: int, llm: dict[str, Any]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        self._questions(rows, ("question", "answer"))
        llm_model(llm, "score the retrieved passages", self.http_client)  # the same checks as for generation
        results = []
        for row in rows:
            hits, seconds = await self._timed_search(kb, row["question"], top_k)
            scores: list[float] = []
            if hits:
                scored = await rerank.rerank(
                    self.search.http, llm, str(row["question"]), hits, 0.0, len(hits)
                )
                by_chunk = {h.chunk_id: h.relevance or 0.0 for h in scored}
                scores = [by_chunk.get(h.chunk_id, 0.0) for h in hits]
            answer = row.get("answer")
            results.append(
                metrics.RelevancyResult(
                    str(row["question"]), None if answer is None else str(answer), scores, seconds
                )
            )
        try:
            summary = metrics.summarize_relevancy(results)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        return summary, [r.record() for r in results]

    # --- stored runs ---------------------------------------------------------------------------------------
    async def list_runs(self, project: str, kb_name: str, limit: int = MAX_LISTED) -> list[EvaluationRow]:
        kb = await self.search.knowledge_base(project, kb_name)
        async with self.db.connect() as conn:
            return await repo.list_for_kb(conn, kb.id, min(max(limit, 1), MAX_LISTED))

    async def get_run(self, project: str, kb_name: str, run_id: int) -> EvaluationRow:
        kb = await self.search.knowledge_base(project, kb_name)
        async with self.db.connect() as conn:
            row = await repo.get(conn, kb.id, run_id) if -(2**63) <= run_id < 2**63 else None
        if row is None:
            raise NotFound(
                f"Evaluation {run_id} of knowledge base {kb.name} does not exist",
                title="Evaluation not found",
            )
        return row
