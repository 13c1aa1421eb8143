"""`extractive`: the keyless default model. No LLM: retrieval only.

A deterministic planner (a pydantic-ai `FunctionModel`) that
1. calls `kb_list_tool`, then `kb_query_tool` once per knowledge base with
   `SELECT * FROM <project>.<kb> WHERE content = '<question>' LIMIT 5`;
2. for an agent with tables only, calls `sql_db_list_tables` (it writes no SQL over tables);
3. answers with the most relevant passages across the knowledge bases (at most three, none more than
   0.15 below the best relevance), quoted with their sources, or says that it found none.
It never paraphrases or reasons: the answer is the retrieved text.
"""

from __future__ import annotations

import ast
import csv
import io
from dataclasses import dataclass

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentkb.agents.providers.base import ProviderContext, register

TOP_PASSAGES = 3
RELEVANCE_MARGIN = 0.15  # passages this far below the best are left out (they rarely answer the question)
ROWS_SOURCE = "TextChunkingPreprocessor"  # the `_source` of rows and query results: cite the chunk instead
PER_KB_LIMIT = 5
MAX_PASSAGE_CHARS = 600
_CSV_MARKER = "Result in CSV format (dialect is 'excel'):\n"


@dataclass(frozen=True, slots=True)
class Passage:
    kb: str
    text: str
    source: str
    relevance: float


def kb_query(kb: str, question: str, limit: int = PER_KB_LIMIT) -> str:
    escaped = question.replace("'", "''")
    return f"SELECT * FROM {kb} WHERE content = '{escaped}' LIMIT {limit}"


def _question(messages: list[ModelMessage]) -> tuple[str, list[ToolReturnPart]]:
    """The current question and the tool results of this run (those after the last user prompt)."""
    question = ""
    returns: list[ToolReturnPart] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                question = part.content if isinstance(part.content, str) else str(part.content)
                returns = []
            elif isinstance(part, ToolReturnPart):
                returns.append(part)
    return question, returns


def parse_passages(kb: str, observation: str) -> list[Passage]:
    """Rows of a `kb_query_tool` observation (`Output columns: ...` then CSV); [] if it is not one."""
    if _CSV_MARKER not in observation:
        return []
    rows = csv.DictReader(io.StringIO(observation.split(_CSV_MARKER, 1)[1]))
    passages = []
    for row in rows:
        text = " ".join((row.get("chunk_content") or "").split())
        if not text:
            continue
        try:
            relevance = float(row.get("relevance") or 0.0)
        except ValueError:
            relevance = 0.0
        source = _source(row.get("metadata") or "")
        if not source or source == ROWS_SOURCE:
            source = row.get("chunk_id") or row.get("id") or ""
        passages.append(Passage(kb=kb, text=text, source=source, relevance=relevance))
    return passages


def _source(metadata: str) -> str:
    try:
        value = ast.literal_eval(metadata)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return ""
    if isinstance(value, dict):
        source = value.get("_source") or value.get("source")
        return str(source) if source else ""
    return ""


def _clip(text: str) -> str:
    return text if len(text) <= MAX_PASSAGE_CHARS else text[: MAX_PASSAGE_CHARS - 1].rstrip() + "…"


def compose_answer(passages: list[Passage], kb_names: list[str], table_names: list[str]) -> str:
    if not kb_names:
        tables = ", ".join(table_names) or "none"
        return (
            "This agent uses the extractive (retrieval-only) model, which answers from knowledge bases only, "
            f"and it has no knowledge bases. Its tables: {tables}. Configure an LLM provider to query them."
        )
    best = sorted(passages, key=lambda p: p.relevance, reverse=True)[:TOP_PASSAGES]
    if best:
        best = [p for p in best if p.relevance >= best[0].relevance - RELEVANCE_MARGIN]
    if not best:
        return f"I found no relevant passages in {', '.join(kb_names)}."
    lines = [f"{i}. {_clip(p.text)} (source: {p.kb}, {p.source})" for i, p in enumerate(best, 1)]
    return "Based on the knowledge base:\n\n" + "\n".join(lines)


def _plan(context: ProviderContext, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    available = {tool.name for tool in info.function_tools}
    question, returns = _question(messages)
    called = [part.tool_name for part in returns]
    kbs = context.kb_names if "kb_query_tool" in available else []

    def call(tool: str, tool_input: str) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart(tool, {"tool_input": tool_input})])

    if kbs and "kb_list_tool" in available and "kb_list_tool" not in called:
        return call("kb_list_tool", "")
    if kbs and called.count("kb_query_tool") < len(kbs):
        return call("kb_query_tool", kb_query(kbs[called.count("kb_query_tool")], question))
    if not kbs and "sql_db_list_tables" in available and "sql_db_list_tables" not in called:
        return call("sql_db_list_tables", "")
    passages: list[Passage] = []
    kb_returns = [part for part in returns if part.tool_name == "kb_query_tool"]
    for kb, part in zip(kbs, kb_returns, strict=False):
        passages.extend(parse_passages(kb, part.model_response_str()))
    return ModelResponse(parts=[TextPart(compose_answer(passages, kbs, context.table_names))])


@register("extractive")
def extractive_model(context: ProviderContext) -> Model:
    async def plan(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:  # async: no thread hop
        return _plan(context, messages, info)

    return FunctionModel(plan, model_name="extractive")
