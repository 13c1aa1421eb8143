"""Reading what a model answered, for the run loop (`run.py`): each tool call's input and `log` (the text the
model wrote before it), the chunks an answer quotes, a citation as a stream's source, a tool's schema."""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

from agentkb.agents.events import Source
from agentkb.agents.providers.extractive import QUOTED
from agentkb.agents.tools import ToolSpec


def tool_schema(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"tool_input": {"type": "string", "description": spec.input_description}},
        "required": ["tool_input"],
        "additionalProperties": False,
    }


def tool_input_of(part: ToolCallPart) -> str:
    value = part.args_as_dict().get("tool_input")
    if isinstance(value, str):
        return value
    return json.dumps(value) if value is not None else str(part.args or "")


def call_logs(response: ModelResponse) -> dict[str, str]:
    """Each tool call's `log`: the text the model wrote before it, else "Calling ..."."""
    logs: dict[str, str] = {}
    text: list[str] = []
    for part in response.parts:
        if isinstance(part, TextPart):
            text.append(part.content)
        elif isinstance(part, ToolCallPart):
            thought = "".join(text).strip()
            logs[part.tool_call_id] = thought or f"Calling {part.tool_name} with input: {tool_input_of(part)}"
            text = []
    return logs


def quoted_chunks(response: ModelResponse) -> list[tuple[str, str]] | None:
    """The chunks a model's answer quotes, as (kb name casefolded, chunk id), when it says (the extractive
    model does, in `provider_details`); None otherwise."""
    details = response.provider_details or {}
    pairs = details.get(QUOTED)
    if not isinstance(pairs, list):
        return None
    return [(str(kb).casefold(), str(chunk)) for kb, chunk in pairs]


def as_source(citation: Any) -> Source:
    return {
        "kind": citation.kind,
        "name": citation.name,
        "chunk_id": citation.chunk_id,
        "source": citation.source,
    }
