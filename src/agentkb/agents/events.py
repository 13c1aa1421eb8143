"""What one agent run emits, in order: Start, then (Action, Step)* for each tool use, then Output or
Error, then End. Pure data; `api/sse.py` turns these into MindsDB's wire chunks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

ErrorType: TypeAlias = Literal[
    "timeout", "connection", "authentication", "not_found", "rate_limit", "general"
]

Source: TypeAlias = dict[str, str | None]
"""A cited source: `{"kind": "kb"|"table", "name", "chunk_id", "source"}`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Start:
    prompt: str
    trace_id: str
    kind: Literal["start"] = "start"


@dataclass(frozen=True, kw_only=True, slots=True)
class Action:
    """A tool call, emitted before the tool runs. `log` is the model's text before the call."""

    tool: str
    tool_input: str
    log: str
    trace_id: str
    kind: Literal["action"] = "action"


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """A finished tool call with the tool's observation."""

    tool: str
    tool_input: str
    log: str
    observation: str
    trace_id: str
    kind: Literal["step"] = "step"


@dataclass(frozen=True, kw_only=True, slots=True)
class Output:
    """The final answer. `sources` are the deduplicated citations of the tools' results; `context` the
    retrieved passages (`{"page_content", "metadata"}`), for the non-streaming response."""

    answer: str
    sources: tuple[Source, ...]
    trace_id: str
    context: tuple[dict[str, Any], ...] = ()
    rows: tuple[dict[str, Any], ...] | None = None  # the answer as rows, when the run was asked for columns
    kind: Literal["output"] = "output"


@dataclass(frozen=True, kw_only=True, slots=True)
class Error:
    content: str
    error_type: ErrorType
    trace_id: str
    kind: Literal["error"] = "error"


@dataclass(frozen=True, kw_only=True, slots=True)
class End:
    kind: Literal["end"] = "end"


Event: TypeAlias = Start | Action | Step | Output | Error | End
