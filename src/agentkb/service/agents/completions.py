"""Querying an agent: plain and streamed completions, and the traces of past runs.

Unknown projects and agents, and requests without a question, fail before anything is streamed (404 /
400 problem+json; MindsDB's stream route answers 500 for an unknown project): the agent is read in one
query, and the `start` chunk follows at once; the run's own database work (its knowledge bases, searches)
and model calls come after it. Each run's trace is handed, when the run ends (however it ends: completed,
error, timeout or cancelled, the client gone), to the `TraceWriter`, which stores it off the response path;
this process answers for it meanwhile. The pydantic-ai agent of each configuration is built once
(`agents.agent_cache`). The agent's provider key is decrypted for the run only; error texts (events and
traces) are masked.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from agentkb.agents.agent_cache import AgentCache
from agentkb.agents.events import End, Error, Event, Output
from agentkb.agents.prompt import RETRIEVAL_PROMPT_TEMPLATE, parse_messages
from agentkb.agents.providers import ModelClient, provider_name
from agentkb.agents.start import run_agent
from agentkb.agents.tools import AgentTools
from agentkb.agents.trace import RunTrace, public_model
from agentkb.credentials import llm_config
from agentkb.errors import BadRequest, NotFound, UpstreamError
from agentkb.secrecy import mask_secrets, mask_text, secret_values
from agentkb.service.agents.traces import TraceWriter
from agentkb.service.catalog.agents import AgentService
from agentkb.service.catalog.data_sources import DataSourceService
from agentkb.service.catalog.files import FileService
from agentkb.service.catalog.knowledge_bases import KnowledgeBaseService
from agentkb.service.retrieval.kb_select import KBSelect
from agentkb.settings import Settings
from agentkb.storage import traces
from agentkb.storage.agents import AgentRow
from agentkb.storage.db import Database
from agentkb.timestamps import optional_timestamp

log = logging.getLogger("agentkb.completions")

DEFAULT_MAX_STEPS = 10
ERROR_TITLES = {
    "timeout": "Agent timed out",
    "authentication": "Model provider rejected the credentials",
    "not_found": "Model not found",
    "rate_limit": "Model provider rate limit",
    "connection": "Model provider unreachable",
}


class AgentRunError(UpstreamError):
    """A run that ended in an error event; `error_type` says which kind (timeout, authentication, ...)."""

    def __init__(self, detail: str, error_type: str) -> None:
        super().__init__(detail, title=ERROR_TITLES.get(error_type, "Agent failed"))
        self.error_type = error_type


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Per-query overrides of an agent's settings (`SELECT ... FROM <agent> ... USING ...`); None: the agent's."""

    timeout: Any = None
    max_iterations: Any = None
    prompt_template: str | None = None
    model: Mapping[str, Any] | None = None
    columns: tuple[str, ...] = ()  # asked of the model as structured output rows (SQL select targets)
    data: dict[str, list[str]] | None = None  # the knowledge bases and tables of this run (checked)
    stream_text: bool = False  # the model's text as it is written (Delta events): `/v1` and the console

    def settings(self, agent_params: Mapping[str, Any]) -> dict[str, Any]:
        given = {"timeout": self.timeout, "max_iterations": self.max_iterations}
        return {**agent_params, **{k: v for k, v in given.items() if v is not None}}


def _number(params: Mapping[str, Any], key: str, default: float, *, minimum: float) -> float:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise BadRequest(f"Agent parameter '{key}' must be a number >= {minimum:g}", title="Invalid agent")
    return float(value)


class CompletionService:
    def __init__(
        self,
        db: Database,
        agents: AgentService,
        kb_select: KBSelect,
        data_sources: DataSourceService,
        kb_service: KnowledgeBaseService,
        settings: Settings,
        http_client: ModelClient,
        *,
        files: FileService | None = None,
    ) -> None:
        self.db = db
        self.agents = agents
        self.kb_select = kb_select  # the KB tools' SELECTs: the SQL endpoint's executor
        self.data_sources = data_sources
        self.kb_service = kb_service
        self.settings = settings
        self.http_client = http_client
        self.files = files  # uploaded table files are the `files` data source of the agents' tools
        self.agent_cache = AgentCache()
        self.traces = TraceWriter(db)

    async def aclose(self) -> None:
        """Store the traces not yet stored."""
        await self.traces.aclose()

    async def stream(
        self, project: str, agent_name: str, messages: Any, options: RunOptions | None = None
    ) -> AsyncIterator[Event]:
        """Check the request, then return the run's events (Start ... End). 404/400 are raised here."""
        parse_messages(messages)
        # the agent with its secrets decrypted: they are used for this run only
        agent = await self.agents.get_for_run(project, agent_name)  # 404s for the project or the agent
        project_name = project.lower()
        options = options or RunOptions()
        timeout_s = self.timeout_s(agent.params, options)
        max_steps = int(
            _number(options.settings(agent.params), "max_iterations", DEFAULT_MAX_STEPS, minimum=1)
        )
        model = llm_config(agent.model, agent.params, self.settings.default_model, options.model)
        provider_name(model)
        prompt = options.prompt_template if options.prompt_template is not None else agent.prompt_template
        if prompt is None and agent.params.get("mode") == "retrieval":  # MindsDB 25.14's default for it
            prompt = RETRIEVAL_PROMPT_TEMPLATE
        agent = replace(agent, model=model, prompt_template=prompt)
        if options.data is not None:
            agent = replace(agent, data=options.data)
        return self._run(
            agent, project_name, messages, timeout_s, max_steps, options.columns, options.stream_text
        )

    def timeout_s(self, agent_params: Mapping[str, Any], options: RunOptions | None = None) -> float:
        """The run's deadline: the query's `timeout`, else the agent's, else the server's default."""
        settings = (options or RunOptions()).settings(agent_params)
        return _number(settings, "timeout", self.settings.agent_timeout_s, minimum=0.001)

    async def complete(
        self, project: str, agent_name: str, messages: Any, options: RunOptions | None = None
    ) -> dict[str, Any]:
        """MindsDB's `{"message": {"role", "content", "trace_id", ...}}`; a failed run is a 502."""
        output: Output | None = None
        error: Error | None = None
        events = await self.stream(project, agent_name, messages, options)
        async for event in events:
            if isinstance(event, Output):
                output = event
            elif isinstance(event, Error):
                error = event
        if error is not None or output is None:
            if error is None:
                raise UpstreamError("The agent produced no answer", title="Agent failed")
            raise AgentRunError(error.content, error.error_type)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": output.answer,
            "trace_id": output.trace_id,
            "context": list(output.context),
            "sources": list(output.sources),
        }
        if output.rows is not None:  # asked for columns (RunOptions.columns): the answer as rows
            message["rows"] = list(output.rows)
        return {"message": message}

    async def trace(self, project: str, agent_name: str, trace_id: str) -> dict[str, Any]:
        agent = await self.agents.get(project, agent_name)  # 404s for the project or the agent
        row = self.traces.pending(trace_id)  # ended, not yet written
        if row is not None and row["agent_id"] != agent.id:
            row = None
        if row is None:
            async with self.db.read() as conn:
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
            search=self.kb_select,
            data_sources=self.data_sources,
            kb_service=self.kb_service,
            files=self.files,
        )

    async def _run(
        self,
        agent: AgentRow,
        project_name: str,
        messages: Any,
        timeout_s: float,
        max_steps: int,
        columns: tuple[str, ...] = (),
        stream_text: bool = False,
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
            http_client=self.http_client.client(),
            trace=trace,
            columns=columns,
            agents=self.agent_cache,
            stream_text=stream_text,
        )
        stored = False
        try:
            async for event in events:
                if isinstance(
                    event, End
                ):  # handed in before the end, so the trace is readable once it arrives
                    await events.aclose()
                    self._store(trace, agent)
                    stored = True
                elif isinstance(event, Error):
                    event = replace(event, content=mask_text(event.content, secret_values(agent.model)))
                yield event
        finally:
            await events.aclose()  # cancels the run if the consumer left early
            if not stored:
                self._store(trace, agent)

    def _store(self, trace: RunTrace, agent: AgentRow) -> None:
        """Hand the trace to the writer (no waiting): a cancelled request still records its (cancelled) run."""
        if trace.error is not None:
            trace.error = mask_text(trace.error, secret_values(agent.model))
        try:
            self.traces.submit(trace.record())
        except Exception:  # a trace must never break an answer
            log.exception("could not store trace %s", trace.trace_id)
