"""`/api/projects/{project_name}/agents`: create, update, list, get, delete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON, problems
from agentkb.api.schemas import AgentFields, AgentRecord, AgentRequest, agent_record
from agentkb.service.catalog import AgentInput

router = APIRouter(prefix="/api/projects/{project_name}/agents", tags=["agents"])


def _input(fields: AgentFields) -> AgentInput:
    return AgentInput(
        name=fields.name,
        model=fields.model.model_dump(exclude_none=True) if fields.model is not None else None,
        model_name=fields.model_name,
        provider=fields.provider,
        data=fields.data.model_dump(exclude_none=True) if fields.data is not None else None,
        prompt_template=fields.prompt_template,
        params=fields.params,
    )


@router.get("", response_model=list[AgentRecord], responses=problems(404))
async def list_agents(project_name: str, services: ServicesDep) -> Any:
    return JSON([agent_record(a) for a in await services.agents.list(project_name)])


@router.post("", status_code=201, response_model=AgentRecord, responses=problems(400, 404, 409, 413))
async def create_agent(project_name: str, body: AgentRequest, services: ServicesDep) -> Any:
    agent = await services.agents.create(project_name, _input(body.agent))
    return JSON(agent_record(agent), status_code=201)


@router.get("/{agent_name}", response_model=AgentRecord, responses=problems(404))
async def get_agent(project_name: str, agent_name: str, services: ServicesDep) -> Any:
    return JSON(agent_record(await services.agents.get(project_name, agent_name)))


@router.put("/{agent_name}", response_model=AgentRecord, responses=problems(400, 404, 409, 413))
async def update_agent(project_name: str, agent_name: str, body: AgentRequest, services: ServicesDep) -> Any:
    return JSON(agent_record(await services.agents.update(project_name, agent_name, _input(body.agent))))


@router.delete("/{agent_name}", status_code=204, responses=problems(404))
async def delete_agent(project_name: str, agent_name: str, services: ServicesDep) -> Response:
    await services.agents.delete(project_name, agent_name)
    return Response(status_code=204)
