"""Agents as OpenAI chat models: `/v1/models` and `/v1/chat/completions` (the HTTP side is
`api/openai_compat.py`).

A model id names an agent: `<project>.<agent>`, or the bare agent name for the default project (both are
accepted; `/v1/models` lists the bare one for the default project). A chat request runs the agent through
the completion service (`CompletionService.stream`, the same run as `.../agents/{a}/completions`): the
conversation's system messages are added to the agent's prompt, the last user message is the question and
the turns before it its history (`agents.prompt.parse_messages`). Usage is what the run's trace recorded:
the tokens its LLM requests reported (none for the extractive model, which calls no LLM).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from agentkb.agents.events import Action, Delta, End, Error, Event, Output, Start, Step
from agentkb.errors import BadRequest, NotFound, UpstreamError
from agentkb.service.agents.completions import AgentRunError, CompletionService, RunOptions
from agentkb.service.catalog.agents import AgentService
from agentkb.service.catalog.projects import ProjectService
from agentkb.storage.agents import AgentRow

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


@dataclass(frozen=True, slots=True)
class AgentModel:
    """One agent as a model: its id, the project it lives in, and its record."""

    id: str
    project: str
    agent: AgentRow


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(slots=True)
class ChatRun:
    """What one finished run produced: the answer, its tool steps and citations, the usage."""

    trace_id: str = ""
    answer: str = ""
    steps: list[dict[str, Any]] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    context: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    def extension(self) -> dict[str, Any]:
        """The `agentkb` field of a response: trace id, tool steps, citations, retrieved passages."""
        return {
            "trace_id": self.trace_id,
            "steps": self.steps,
            "sources": self.sources,
            "context": self.context,
        }


def step_record(event: Step) -> dict[str, Any]:
    return {"tool": event.tool, "tool_input": event.tool_input, "observation": event.observation}


def agent_messages(messages: Any) -> list[dict[str, Any]]:
    """OpenAI chat messages as the agent's `{"role", "content"}` messages (developer counts as system);
    400 for what an agent cannot take (tool results, non-text content is refused by the prompt parser)."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty array", title="Invalid messages")
    converted: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ROLES:
            raise BadRequest(
                f"'messages[{i}].role' must be one of {sorted(ROLES)}: an agent runs its own tools",
                title="Invalid messages",
            )
        converted.append({"role": ROLES[role], "content": message.get("content")})
    return converted


class ChatService:
    def __init__(
        self, projects: ProjectService, agents: AgentService, completions: CompletionService
    ) -> None:
        self.projects = projects
        self.agents = agents
        self.completions = completions

    @property
    def default_project(self) -> str:
        return self.projects.default_project

    def model_id(self, project: str, agent: str) -> str:
        return agent if project.lower() == self.default_project.lower() else f"{project}.{agent}"

    async def models(self) -> list[AgentModel]:
        """Every agent of every project, as a model."""
        found: list[AgentModel] = []
        for project in await self.projects.list():
            for agent in await self.agents.list(project.name):
                found.append(AgentModel(self.model_id(project.name, agent.name), project.name, agent))
        return found

    def resolve(self, model: object) -> tuple[str, str]:
        """(project, agent) named by a model id; 400 when it is no model id at all."""
        if not isinstance(model, str) or not model.strip():
            raise BadRequest(
                "'model' must name an agent: <project>.<agent>, or <agent>", title="Invalid model"
            )
        project, dot, agent = model.strip().rpartition(".")
        if not dot:
            return self.default_project, agent
        if not project or not agent or "." in project:
            raise NotFound(f"The model '{model}' does not exist", title="Model not found")
        return project, agent

    async def stream(
        self, model: object, messages: Any, *, stream_text: bool = False
    ) -> AsyncIterator[Event]:
        """The run's events (Start ... End), with Deltas of the model's text as it comes when `stream_text`;
        an unknown model (404) or bad messages (400) raise here."""
        project, agent = self.resolve(model)
        options = RunOptions(stream_text=stream_text)
        return await self.completions.stream(project, agent, agent_messages(messages), options)

    async def usage(self, model: object, trace_id: str) -> Usage:
        """The tokens a finished run's LLM requests reported, from its stored trace."""
        project, agent = self.resolve(model)
        trace = await self.completions.trace(project, agent, trace_id)
        recorded = trace.get("usage") or {}
        return Usage(
            prompt_tokens=int(recorded.get("input_tokens") or 0),
            completion_tokens=int(recorded.get("output_tokens") or 0),
            requests=int(recorded.get("requests") or 0),
        )

    async def complete(self, model: object, messages: Any) -> ChatRun:
        """Run the agent to its end; a failed run raises `AgentRunError` (502)."""
        run = ChatRun()
        error: Error | None = None
        answered = False
        async for event in await self.stream(model, messages):
            if isinstance(event, Start):
                run.trace_id = event.trace_id
            elif isinstance(event, Step):
                run.steps.append(step_record(event))
            elif isinstance(event, Output):
                answered = True
                run.answer = event.answer
                run.sources = [dict(s) for s in event.sources]
                run.context = list(event.context)
            elif isinstance(event, Error):
                error = event
            elif isinstance(event, Action | Delta | End):
                pass
        if error is not None:
            raise AgentRunError(error.content, error.error_type)
        if not answered:
            raise UpstreamError("The agent produced no answer", title="Agent failed")
        run.usage = await self.usage(model, run.trace_id)
        return run
