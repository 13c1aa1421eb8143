"""Querying an agent: plain and streamed completions, and the traces of past runs.

Unknown projects and agents, and requests without a question, fail before anything is streamed (404 /
400 problem+json; MindsDB's stream route answers 500 for an unknown project). Each run's trace is stored
when the run ends, however it ends: completed, error, timeout or cancelled (the client went away).
The agent's provider key is decrypted for the run only; error texts (events and traces) are masked.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import anyio
import httpx2

from agentkb.agents.events import End, Error, Event, Output
from agentkb.agents.prompt import parse_messages
from agentkb.agents.providers import provider_name
from agentkb.agents.run import run_agent
from agentkb.agents.tools import AgentTools
from agentkb.agents.trace import RunTrace, public_model
from agentkb.errors import BadRequest, NotFound, UpstreamError
from agentkb.secrecy import mask_secrets, mask_text, secret_values
from agentkb.service.agents import AgentService
from agentkb.service.data_sources import DataSourceService
from agentkb.service.knowledge_bases import KnowledgeBaseService
from agentkb.service.search import SearchService
from agentkb.settings import Settings
from agentkb.storage import traces
from agentkb.storage.agents import AgentRow
from agentkb.storage.db import Database
from agentkb.timestamps import optional_timestamp

log = logging.getLogger("agentkb.completions")

DEFAULT_MAX_STEPS = 10
STORE_GRACE_S = 10.0
ERROR_TITLES = {
    "timeout": "Agent timed out",
    "authentication": "Model provider rejected the credentials",
    "not_found": "Model not found",
    "rate_limit": "Model provider rate limit",
    "connection": "Model provider unreachable",
}


def _number(params: dict[str, Any], key: str, default: float, *, minimum: float) -> float:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise BadRequest(f"Agent parameter '{key}' must be a number >= {minimum:g}", title="Invalid agent")
    return float(value)


class CompletionService:
    def __init__(
        self,
        db: Database,
        agents: AgentService,
        search: SearchService,
        data_sources: DataSourceService,
        kb_service: KnowledgeBaseService,
        settings: Settings,
        http_client: httpx2.AsyncClient,
    ) -> None:
        self.db = db
        self.agents = agents
        self.search = search
        self.data_sources = data_sources
        self.kb_service = kb_service
        self.settings = settings
        self.http_client = http_client

    async def stream(self, project: str, agent_name: str, messages: Any) -> AsyncIterator[Event]:
        """Check the request, then return the run's events (Start ... End). 404/400 are raised here."""
        parse_messages(messages)
        agent = await self.agents.get_for_run(project, agent_name)  # 404s for the project or the agent
        project_name = project.lower()
        provider_name(agent.model)
        timeout_s = _number(agent.params, "timeout", self.settings.agent_timeout_s, minimum=0.001)
        max_steps = int(_number(agent.params, "max_iterations", DEFAULT_MAX_STEPS, minimum=1))
        return self._run(agent, project_name, messages, timeout_s, max_steps)

    async def complete(self, project: str, agent_name: str, messages: Any) -> dict[str, Any]:
        """MindsDB's `{"message": {"role", "content", "trace_id", ...}}`; a failed run is a 502."""
        output: Output | None = None
        error: Error | None = None
        events = await self.stream(project, agent_name, messages)
        async for event in events:
            if isinstance(event, Output):
                output = event
            elif isinstance(event, Error):
                error = event
        if error is not None or output is None:
            if error is None:
                raise UpstreamError("The agent produced no answer", title="Agent failed")
            raise UpstreamError(error.content, title=ERROR_TITLES.get(error.error_type, "Agent failed"))
        return {
            "message": {
                "role": "assistant",
                "content": output.answer,
                "trace_id": output.trace_id,
                "context": list(output.context),
                "sources": list(output.sources),
            }
        }

    async def trace(self, project: str, agent_name: str, trace_id: str) -> dict[str, Any]:
        agent = await self.agents.get(project, agent_name)  # 404s for the project or the agent
        async with self.db.connect() as conn:
            row = await traces.get(conn, agent.id, trace_id)
        if row is None:
            raise NotFound(f"Trace {trace_id} of agent {agent.name} does not exist", title="Trace not found")
        usage = dict(row["usage"])
        model = usage.pop("model", None)
        error_type = usage.pop("error_type", None)
        started, finished = row["started_at"], row["finished_at"]
        return {
            "trace_id": row["trace_id"],
            "agent_id": row["agent_id"],
            "agent_name": agent.name,
            "project_id": row["project_id"],
            "question": row["question"],
            "answer": row["answer"],
            "status": row["status"],
            "error": mask_text(row["error"]) if row["error"] else row["error"],
            "error_type": error_type,
            "model": mask_secrets(model),
            "steps": row["steps"],
            "usage": usage,
            "started_at": optional_timestamp(started),
            "finished_at": optional_timestamp(finished),
            "duration_ms": round((finished - started).total_seconds() * 1000, 2) if finished else None,
        }

    def _tools(self, agent: AgentRow, project_name: str) -> AgentTools:
        return AgentTools(
            project=project_name,
            knowledge_bases=list(agent.data.get("knowledge_bases") or []),
            tables=list(agent.data.get("tables") or []),
            search=self.search,
            data_sources=self.data_sources,
            kb_service=self.kb_service,
        )

    async def _run(
        self, agent: AgentRow, project_name: str, messages: Any, timeout_s: float, max_steps: int
    ) -> AsyncIterator[Event]:
        trace = RunTrace(
            agent.id, agent.project_id, parse_messages(messages).prompt, public_model(agent.model)
        )
        events = run_agent(
            agent,
            messages,
            self._tools(agent, project_name),
            timeout_s=timeout_s,
            max_steps=max_steps,
            http_client=self.http_client,
            trace=trace,
        )
        stored = False
        try:
            async for event in events:
                if isinstance(event, End):  # stored before the end, so the trace is readable once it arrives
                    await events.aclose()
                    await self._store(trace, agent)
                    stored = True
                elif isinstance(event, Error):
                    event = replace(event, content=mask_text(event.content, secret_values(agent.model)))
                yield event
        finally:
            await events.aclose()  # cancels the run if the consumer left early
            if not stored:
                await self._store(trace, agent)

    async def _store(self, trace: RunTrace, agent: AgentRow) -> None:
        """Best effort, and shielded: a cancelled request still records its (cancelled) run."""
        if trace.error is not None:
            trace.error = mask_text(trace.error, secret_values(agent.model))
        with anyio.CancelScope(shield=True), anyio.move_on_after(STORE_GRACE_S):
            try:
                async with self.db.transaction() as conn:
                    await traces.insert(conn, trace.record())
            except Exception:  # a trace must never break an answer
                log.exception("could not store trace %s", trace.trace_id)
