"""`extractive`: the keyless default model. No LLM: retrieval only.

A deterministic planner (a pydantic-ai `FunctionModel`) that
1. calls `kb_list_tool`, then `kb_query_tool` once per knowledge base with
   `SELECT * FROM <project>.<kb> WHERE content = '<question>' LIMIT 5`;
2. for an agent with tables only, calls `sql_db_list_tables` (it writes no SQL over tables);
3. answers with the few sentences of the retrieved passages that answer the question (`sentences.py`),
   passage by passage with their sources, or says that it found none.
It never paraphrases or reasons: the answer is retrieved text. The answer's `provider_details["quoted"]` lists
the chunks it quotes (`[kb, chunk_id]` pairs), which become the run's `sources`.
"""

from __future__ import annotations

import ast
import csv
import io
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentkb.agents.providers import sentences
from agentkb.agents.providers.base import ProviderContext, register

if TYPE_CHECKING:  # pydantic-ai is imported when the first model is built (a large import)
    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolReturnPart
    from pydantic_ai.models import Model
    from pydantic_ai.models.function import AgentInfo

QUOTED = "quoted"  # the key of the answer's `provider_details` that lists the quoted chunks
ROWS_SOURCE = "TextChunkingPreprocessor"  # the `_source` of rows and query results: cite the chunk instead
PER_KB_LIMIT = 5
_CSV_MARKER = "Result in CSV format (dialect is 'excel'):\n"


@dataclass(frozen=True, slots=True)
class Passage:
    kb: str
    text: str
    source: str
    relevance: float
    chunk_id: str = ""


def kb_query(kb: str, question: str, limit: int = PER_KB_LIMIT) -> str:
    escaped = question.replace("'", "''")
    return f"SELECT * FROM {kb} WHERE content = '{escaped}' LIMIT {limit}"


def _question(messages: list[ModelMessage]) -> tuple[str, list[ToolReturnPart]]:
    """The current question and the tool results of this run (those after the last user prompt)."""
    from pydantic_ai.messages import ModelRequest, ToolReturnPart, UserPromptPart

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
        text = row.get("chunk_content") or ""
        if not text.strip():
            continue
        try:
            relevance = float(row.get("relevance") or 0.0)
        except ValueError:
            relevance = 0.0
        chunk_id = row.get("chunk_id") or ""
        source = _source(row.get("metadata") or "")
        if not source or source == ROWS_SOURCE:
            source = chunk_id or row.get("id") or ""
        passages.append(Passage(kb=kb, text=text, source=source, relevance=relevance, chunk_id=chunk_id))
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


def compose_answer(
    question: str, passages: list[Passage], kb_names: list[str], table_names: list[str]
) -> tuple[str, list[Passage]]:
    """The answer text and the passages it quotes."""
    if not kb_names:
        tables = ", ".join(table_names) or "none"
        return (
            "This agent uses the extractive (retrieval-only) model, which answers from knowledge bases only, "
            f"and it has no knowledge bases. Its tables: {tables}. Configure an LLM provider to query them.",
            [],
        )
    ranked = sorted(passages, key=lambda p: p.relevance, reverse=True)
    chosen = sentences.select(question, [p.text for p in ranked], [p.relevance for p in ranked])
    if not chosen:
        return f"I found no relevant passages in {', '.join(kb_names)}.", []
    lines: list[str] = []
    quoted: list[Passage] = []
    for index in dict.fromkeys(s.passage for s in chosen):
        passage = ranked[index]
        said = [s for s in chosen if s.passage == index]
        text = said[0].text
        for before, sentence in zip(said, said[1:], strict=False):
            text += (" " if sentence.position == before.position + 1 else " … ") + sentence.text
        lines.append(f"{len(lines) + 1}. {text} (source: {passage.kb}, {passage.source})")
        quoted.append(passage)
    return "Based on the knowledge base:\n\n" + "\n".join(lines), quoted


def _plan(context: ProviderContext, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

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
    answer, quoted = compose_answer(question, passages, kbs, context.table_names)
    return ModelResponse(
        parts=[TextPart(answer)], provider_details={QUOTED: [[p.kb, p.chunk_id] for p in quoted]}
    )


@register("extractive")
def extractive_model(context: ProviderContext) -> Model:
    from pydantic_ai.models.function import FunctionModel

    async def plan(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:  # async: no thread hop
        return _plan(context, messages, info)

    return FunctionModel(plan, model_name="extractive")
