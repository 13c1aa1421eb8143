"""Agents in the console: the list, a create / edit form (model, data, prompt), and a chat whose run is
streamed (`/chat`: the agent service's events, as server-sent JSON, read by `static/console.js`)."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from agentkb.console import forms
from agentkb.console.render import ConsoleRoute, page, see_other, services_of
from agentkb.console.session import PREFIX, check_csrf
from agentkb.console.streams import encode, sse_stream
from agentkb.errors import BadRequest
from agentkb.secrecy import mask_text
from agentkb.service.agents import RunOptions
from agentkb.service.catalog import PROVIDERS, AgentInput, fit_to_show
from agentkb.service.platform import RUN_STOPPED, Encoder, relay
from agentkb.service.types import AgentRow, End, Error, Event, Start

log = logging.getLogger("agentkb.console")
router = APIRouter(prefix=f"{PREFIX}/projects/{{project}}/agents", route_class=ConsoleRoute)
MAX_TURNS = 20


def _url(project: str, agent: str | None = None) -> str:
    base = f"{PREFIX}/projects/{project}/agents"
    return f"{base}/{agent}" if agent else base


def shown(agent: AgentRow) -> dict[str, Any]:
    """What a page may show of an agent: its model with every secret masked."""
    fit = fit_to_show(agent)
    return {
        "name": agent.name,
        "model": fit.model,
        "data": agent.data,
        "prompt_template": agent.prompt_template or "",
        "params": fit.params,
        "has_key": bool(agent.model.get("api_key")),
        "updated_at": agent.updated_at,
    }


class AgentForm(BaseModel):
    """The agent form's fields (all text; the edit form has no name)."""

    name: str = ""
    provider: str = ""
    model_name: str = ""
    api_key: str = ""
    base_url: str = ""
    knowledge_bases: list[str] = []
    tables: str = ""
    prompt_template: str = ""


def _input(form: AgentForm, name: str | None, stored: AgentRow | None = None) -> AgentInput:
    model: dict[str, Any] = {}
    for field, value in (
        ("provider", form.provider),
        ("model_name", form.model_name),
        ("base_url", form.base_url),
    ):
        if forms.text(value):
            model[field] = forms.text(value)
    key = forms.text(form.api_key)
    if key is None and stored is not None and stored.model.get("api_key") and model:
        key = stored.model["api_key"]  # left blank on the form: the stored key stays
    if key is not None:
        model["api_key"] = key
    data = {
        "knowledge_bases": [kb for kb in form.knowledge_bases if kb],
        "tables": forms.names(form.tables) or [],
    }
    prompt = form.prompt_template.strip() if stored is not None else forms.text(form.prompt_template)
    return AgentInput(name=name, model=model or None, data=data, prompt_template=prompt)


async def _kb_names(request: Request, project: str) -> list[str]:
    return [kb.name for kb in await services_of(request).knowledge_bases.list(project)]


@router.get("")
async def list_agents(request: Request, project: str) -> Response:
    agents = await services_of(request).agents.list(project)
    return await page(
        request,
        "agents.html",
        project=project,
        section="agents",
        agents=[shown(a) for a in agents],
        kbs=await _kb_names(request, project),
        providers=PROVIDERS,
    )


@router.post("", dependencies=[Depends(check_csrf)])
async def create_agent(request: Request, project: str, form: Annotated[AgentForm, Form()]) -> Response:
    given = _input(form, form.name)
    agent = await services_of(request).agents.create(project, given)
    return see_other(_url(project, agent.name))


@router.get("/{agent}")
async def agent_page(request: Request, project: str, agent: str) -> Response:
    row = await services_of(request).agents.get(project, agent)
    kbs = await _kb_names(request, project)
    chosen = [ref.split(".", 1)[-1] for ref in row.data.get("knowledge_bases") or []]
    return await page(
        request,
        "agent.html",
        project=project,
        section="agents",
        agent=shown(row),
        kbs=sorted(set(kbs) | set(chosen)),
        chosen=chosen,
        providers=PROVIDERS,
    )


@router.post("/{agent}", dependencies=[Depends(check_csrf)])
async def update_agent(
    request: Request, project: str, agent: str, form: Annotated[AgentForm, Form()]
) -> Response:
    agents = services_of(request).agents
    given = _input(form, None, await agents.get(project, agent))
    await agents.update(project, agent, given)
    return see_other(_url(project, agent))


@router.post("/{agent}/delete", dependencies=[Depends(check_csrf)])
async def delete_agent(request: Request, project: str, agent: str) -> Response:
    await services_of(request).agents.delete(project, agent)
    return see_other(_url(project))


def _messages(question: str, history: str) -> list[dict[str, Any]]:
    """The conversation so far (the page keeps it: a JSON list of {question, answer}) and the question."""
    if not question.strip():
        raise BadRequest("Ask a question", title="Missing question")
    try:
        turns = json.loads(history) if history.strip() else []
    except json.JSONDecodeError as exc:
        raise BadRequest("The conversation could not be read", title="Invalid form field") from exc
    if not isinstance(turns, list):
        raise BadRequest("The conversation could not be read", title="Invalid form field")
    messages = [
        {"question": str(t.get("question", "")), "answer": str(t.get("answer", ""))}
        for t in turns[-MAX_TURNS:]
        if isinstance(t, dict)
    ]
    return [*messages, {"question": question.strip(), "answer": None}]


def event_object(event: Event) -> dict[str, Any]:
    """One event of the run as the page reads it: its fields and its `kind`."""
    return dataclasses.asdict(event)


class ChatEvents(Encoder[Event]):
    """The run's events as the page reads them; a run that fails or is stopped by the server shutting
    down ends with an `error` event and `end`."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.trace_id = ""
        self.ended = False
        self.problem = RUN_STOPPED  # why the run ends without its end event, unless it failed

    def item(self, item: Event) -> list[str]:
        if isinstance(item, Start):
            self.trace_id = item.trace_id
        self.ended = isinstance(item, End)
        return [encode(event_object(item))]

    def ends(self, item: Event) -> bool:
        return isinstance(item, End)

    def failed(self, exc: Exception) -> list[str]:  # reported on the page; the service stores the trace
        log.error("console chat of agent %s failed", self.agent, exc_info=exc)
        self.problem = mask_text(f"The agent run failed: {exc}")
        return []

    async def last(self) -> list[str]:
        if self.ended:
            return []
        stopped = Error(content=self.problem, error_type="general", trace_id=self.trace_id)
        return [encode(event_object(stopped)), encode(event_object(End()))]


@router.post("/{agent}/chat", dependencies=[Depends(check_csrf)])
async def chat(
    request: Request, project: str, agent: str, question: str = Form(""), history: str = Form("")
) -> StreamingResponse:
    """The run as server-sent events (the same service as `/completions/stream`): start, the model's text
    as it writes it (`delta`), its thoughts and tool calls (`action`), their observations (`step`), the
    answer with its citations (`output`) or an `error`, then `end`. Closing the page cancels the run."""
    services = services_of(request)
    options = RunOptions(stream_text=True)  # the answer's text shows as the model writes it
    events = await services.completions.stream(project, agent, _messages(question, history), options)
    return sse_stream(relay(events, services.shutdown.stopping, ChatEvents(agent)))
