"""What one agent run emits, in order: Start, then (Action, Step)* for each tool use, then Output or
Error, then End; with text streaming asked for, Delta events carry each model response's text as it is
written, before that response's Actions or the Output. Pure data; `api/sse.py` turns these into MindsDB's
wire chunks (where Delta has no place), `/v1` and the console show Deltas as they come."""

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
class Delta:
    """A piece of a model response's text as the model writes it. `response` numbers the run's model
    responses (from 1): text of a response that then calls a tool is the model's thought before the call,
    not the answer; the answer is the text of the last response."""

    text: str
    response: int
    trace_id: str
    kind: Literal["delta"] = "delta"


@dataclass(frozen=True, kw_only=True, slots=True)
class Output:
    """The final answer. `sources` are the deduplicated citations of the tools' results; `context` the
    retrieved passages (`{"page_content", "metadata"}`), for the non-streaming response."""

    answer: str
    sources: tuple[Source, ...]
    trace_id: str
    context: tuple[dict[str, Any], ...] = ()
    rows: tuple[dict[str, Any], ...] | None = None  # the answer as rows, when the run was asked for columns
    streamed: bool = False  # the answer's text was sent as Deltas (of the last response), all of it
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


Event: TypeAlias = Start | Action | Step | Delta | Output | Error | End
