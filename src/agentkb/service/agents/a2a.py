"""A2A (Agent2Agent) tasks: an agent's run as a task, for MindsDB's A2A endpoint (`/a2a/`, the HTTP side is
`api/a2a.py`).

A request names its agent as MindsDB's does (`agentName` / `agent_name` in the message's metadata; here also
in the request's, and `<project>.<agent>` or a `project_name` beside it; default: the default project). The
run is the completion service's (`ChatService.stream`: the agent's tools and model, its trace stored). A task
keeps its conversation: a message naming a known task (`taskId`, MindsDB's `id`) or context (`contextId`,
MindsDB's `sessionId`) continues it, the earlier questions and answers as the run's history.

Tasks live in this process's memory (MindsDB's too), the latest `MAX_TASKS`; each is visible only to the
principal that started it (another caller's `tasks/get` finds nothing).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from agentkb.agents.events import Error, Event, Output, Start
from agentkb.errors import BadRequest, NotFound
from agentkb.service.agents.openai_compat import ChatService
from agentkb.service.platform import access

MAX_TASKS = 1000
TERMINAL = ("completed", "failed", "canceled")


@dataclass(frozen=True, slots=True)
class A2ARequest:
    """One message to an agent: `agent` (`<agent>` or `<project>.<agent>`), the question's text, and where
    it belongs (a task or context to continue); `history`: (role, text) turns given with the message."""

    agent: str
    text: str
    project: str | None = None
    task_id: str | None = None
    context_id: str | None = None
    history: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class A2ATask:
    id: str
    context_id: str
    project: str
    agent: str
    owner: str | None
    history: list[tuple[str, str]]  # (role: "user" | "agent", text), the question last until answered
    state: str = "submitted"
    answer: str | None = None
    error: str | None = None
    trace_id: str | None = None
    sources: list[dict[str, Any]] = field(default_factory=list)
    updated_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    def moved(self, state: str) -> None:
        self.state = state
        self.updated_at = dt.datetime.now(dt.UTC)


def _owner() -> str | None:
    principal = access.current()
    return principal.id if principal is not None else None


class A2AService:
    def __init__(self, chat: ChatService, *, max_tasks: int = MAX_TASKS) -> None:
        self.chat = chat
        self.max_tasks = max_tasks
        self.tasks: OrderedDict[str, A2ATask] = OrderedDict()
        self.contexts: dict[str, str] = {}  # context id → its latest task's id

    def get(self, task_id: Any) -> A2ATask:
        """A task this caller started; 404 otherwise (another's, forgotten, or never known)."""
        task = self.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None or task.owner != _owner():
            raise NotFound(f"Task {task_id} does not exist", title="Task not found")
        return task

    def _prior(self, request: A2ARequest) -> A2ATask | None:
        for task_id in (request.task_id, self.contexts.get(request.context_id or "")):
            if task_id and (task := self.tasks.get(task_id)) is not None and task.owner == _owner():
                return task
        return None

    async def start(self, request: A2ARequest) -> tuple[A2ATask, AsyncIterator[Event]]:
        """The task (stored, `working`) and its run's events; an unknown agent (404) or an empty question
        (400) raise here, before anything is stored."""
        if not request.text.strip():
            raise BadRequest("The message has no text part to ask the agent", title="Invalid message")
        agent = request.agent
        if request.project and "." not in agent:
            agent = f"{request.project}.{agent}"
        prior = self._prior(request)
        if prior is not None and prior.state not in TERMINAL:
            raise BadRequest(f"Task {prior.id} is still running", title="Task running")
        history = [*(prior.history if prior else []), *request.history]
        messages = [
            {"role": "user" if role == "user" else "assistant", "content": text} for role, text in history
        ]
        events = await self.chat.stream(agent, [*messages, {"role": "user", "content": request.text}])
        project, name = self.chat.resolve(agent)
        task = A2ATask(
            id=request.task_id or uuid.uuid4().hex,
            context_id=request.context_id or (prior.context_id if prior else uuid.uuid4().hex),
            project=project,
            agent=name,
            owner=_owner(),
            history=[*history, ("user", request.text)],
        )
        task.moved("working")
        self.tasks[task.id] = task
        self.tasks.move_to_end(task.id)
        self.contexts[task.context_id] = task.id
        while len(self.tasks) > self.max_tasks:
            _, dropped = self.tasks.popitem(last=False)
            if self.contexts.get(dropped.context_id) == dropped.id:
                del self.contexts[dropped.context_id]
        return task, self._tracked(task, events)

    async def run(self, request: A2ARequest) -> A2ATask:
        """The task, its run finished (`completed` with the answer, or `failed` with the error)."""
        task, events = await self.start(request)
        async for _ in events:
            pass
        return task

    @staticmethod
    async def _tracked(task: A2ATask, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """The run's events, recorded on the task as they pass; a run left unfinished (the client gone, the
        server stopping) leaves it `canceled`."""
        try:
            async for event in events:
                if isinstance(event, Start):
                    task.trace_id = event.trace_id
                elif isinstance(event, Output):
                    task.answer = event.answer
                    task.sources = [dict(s) for s in event.sources]
                    task.history.append(("agent", event.answer))
                    task.moved("completed")
                elif isinstance(event, Error):
                    task.error = event.content
                    task.moved("failed")
                yield event
        finally:
            if task.state not in TERMINAL:
                task.moved("canceled")
