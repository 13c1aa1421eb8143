"""Agents in the console: the list, a create / edit form (model, data, prompt), and a chat whose run is
streamed (`/chat`: the agent service's events, as server-sent JSON, read by `static/console.js`)."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request, Response
from fastapi.responses import StreamingResponse

from agentkb.console import forms
from agentkb.console.render import ConsoleRoute, page, see_other, services_of
from agentkb.console.session import PREFIX, check_csrf
from agentkb.console.streams import SSE_HEADERS, encode
from agentkb.errors import BadRequest
from agentkb.secrecy import mask_secrets, mask_text
from agentkb.service.catalog import PROVIDERS, AgentInput
from agentkb.service.platform import Stopped, until
from agentkb.service.types import AgentRow, End, Error, Event, Start

log = logging.getLogger("agentkb.console")
router = APIRouter(prefix=f"{PREFIX}/projects/{{project}}/agents", route_class=ConsoleRoute)
SHUTDOWN = "The server is shutting down; the agent run was stopped before it finished"
MAX_TURNS = 20


def _url(project: str, agent: str | None = None) -> str:
    base = f"{PREFIX}/projects/{project}/agents"
    return f"{base}/{agent}" if agent else base


def shown(agent: AgentRow) -> dict[str, Any]:
    """What a page may show of an agent: its model with every secret masked."""
    return {
        "name": agent.name,
        "model": mask_secrets(agent.model),
        "data": agent.data,
        "prompt_template": agent.prompt_template or "",
        "params": mask_secrets(agent.params),
        "has_key": bool(agent.model.get("api_key")),
        "updated_at": agent.updated_at,
    }


def _input(
    name: str | None,
    provider: str,
    model_name: str,
    api_key: str,
    base_url: str,
    knowledge_bases: list[str] | None,
    tables: str,
    prompt_template: str,
    stored: AgentRow | None = None,
) -> AgentInput:
    model: dict[str, Any] = {}
    for field, value in (("provider", provider), ("model_name", model_name), ("base_url", base_url)):
        if forms.text(value):
            model[field] = forms.text(value)
    key = forms.text(api_key)
    if key is None and stored is not None and stored.model.get("api_key") and model:
        key = stored.model["api_key"]  # left blank on the form: the stored key stays
    if key is not None:
        model["api_key"] = key
    data = {
        "knowledge_bases": [kb for kb in knowledge_bases or [] if kb],
        "tables": forms.names(tables) or [],
    }
    return AgentInput(
        name=name,
        model=model or None,
        data=data,
        prompt_template=prompt_template.strip() if stored is not None else forms.text(prompt_template),
    )


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
async def create_agent(
    request: Request,
    project: str,
    name: str = Form(""),
    provider: str = Form(""),
    model_name: str = Form(""),
    api_key: str = Form(""),
    base_url: str = Form(""),
    knowledge_bases: Annotated[list[str] | None, Form()] = None,
    tables: str = Form(""),
    prompt_template: str = Form(""),
) -> Response:
    given = _input(name, provider, model_name, api_key, base_url, knowledge_bases, tables, prompt_template)
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
    request: Request,
    project: str,
    agent: str,
    provider: str = Form(""),
    model_name: str = Form(""),
    api_key: str = Form(""),
    base_url: str = Form(""),
    knowledge_bases: Annotated[list[str] | None, Form()] = None,
    tables: str = Form(""),
    prompt_template: str = Form(""),
) -> Response:
    agents = services_of(request).agents
    stored = await agents.get(project, agent)
    given = _input(
        None, provider, model_name, api_key, base_url, knowledge_bases, tables, prompt_template, stored
    )
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


@router.post("/{agent}/chat", dependencies=[Depends(check_csrf)])
async def chat(
    request: Request, project: str, agent: str, question: str = Form(""), history: str = Form("")
) -> StreamingResponse:
    """The run as server-sent events (the same service as `/completions/stream`): start, the model's
    thoughts and tool calls (`action`), their observations (`step`), the answer with its citations
    (`output`) or an `error`, then `end`. Closing the page cancels the run."""
    services = services_of(request)
    events = await services.completions.stream(project, agent, _messages(question, history))

    async def chunks() -> AsyncIterator[str]:
        trace_id = ""
        ended = False
        problem = SHUTDOWN  # why the run ends without its end event, unless it failed
        try:
            async for event in until(events, services.shutdown.stopping):
                if isinstance(event, Start):
                    trace_id = event.trace_id
                ended = isinstance(event, End)
                yield encode(event_object(event))
        except Stopped:  # the server is shutting down: `problem` says so
            pass
        except Exception as exc:  # reported on the page; the trace is stored by the service
            log.exception("console chat of agent %s failed", agent)
            problem = mask_text(f"The agent run failed: {exc}")
        if not ended:
            stopped = Error(content=problem, error_type="general", trace_id=trace_id)
            yield encode(event_object(stopped))
            yield encode(event_object(End()))

    return StreamingResponse(chunks(), media_type="text/event-stream", headers=SSE_HEADERS)
