"""The trace of one agent run: question, tool steps with timings, answer or error, token usage.

`run_agent` fills a `RunTrace` as it goes; the completion service stores it (`storage/traces.py`) when
the run ends, however it ends, and `GET .../traces/{trace_id}` returns it.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias

TraceStatus: TypeAlias = Literal["running", "completed", "max_steps", "error", "timeout", "cancelled"]


def _now() -> datetime:
    return datetime.now(UTC)


def new_trace_id() -> str:
    return uuid.uuid4().hex


@dataclass(slots=True)
class TraceStep:
    tool: str
    tool_input: str
    log: str
    started_at: str
    observation: str | None = None
    duration_ms: float | None = None
    citations: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class RunTrace:
    agent_id: int
    project_id: int
    question: str
    model: dict[str, Any]
    trace_id: str = field(default_factory=new_trace_id)
    status: TraceStatus = "running"
    answer: str | None = None
    error: str | None = None
    error_type: str | None = None
    steps: list[TraceStep] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    started_at: datetime = field(default_factory=_now)
    finished_at: datetime | None = None
    _clock: float = field(default_factory=time.perf_counter, repr=False)

    @property
    def finished(self) -> bool:
        return self.status != "running"

    def elapsed_ms(self) -> float:
        return round((time.perf_counter() - self._clock) * 1000, 2)

    def finish(
        self,
        status: TraceStatus,
        *,
        answer: str | None = None,
        error: str | None = None,
        error_type: str | None = None,
    ) -> None:
        """Record how the run ended; the first ending wins."""
        if self.finished:
            return
        self.status = status
        self.answer = answer
        self.error = error
        self.error_type = error_type
        self.finished_at = _now()

    def record(self) -> dict[str, Any]:
        """Column values for `agent_traces`."""
        return {
            "trace_id": self.trace_id,
            "agent_id": self.agent_id,
            "project_id": self.project_id,
            "question": self.question,
            "answer": self.answer,
            "status": self.status,
            "error": self.error,
            "steps": [asdict(step) for step in self.steps],
            "usage": {**self.usage, "model": self.model, "error_type": self.error_type},
            "started_at": self.started_at,
            "finished_at": self.finished_at or _now(),
        }


def public_model(model: dict[str, Any]) -> dict[str, Any]:
    """The model fields worth keeping in a trace (never the credentials)."""
    keep = ("provider", "model_name", "temperature", "max_tokens", "top_p", "top_k")
    return {k: model[k] for k in keep if k in model}
