"""Agents: stored configurations (model, connected data, prompt) inside a project.

Secret fields of `model` and `params` are stored sealed (`secrecy.SecretBox`). The spec has the agent
record echo `model` (its `api_key` included), so the rows this service returns carry `model` revealed (a
secret that cannot be decrypted reads `******`); `params` stay sealed, masked for clients (`service.catalog.shown`).
`get_for_run` reveals both strictly, for calling the provider (flat params such as `openai_api_key` are
credentials too). A secret sent back as `******` on update keeps the stored one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy.exc import IntegrityError

from agentkb.errors import Conflict, agent_not_found, project_not_found
from agentkb.secrecy import (
    SecretBox,
    refuse_sealed,
    restore_masked,
)
from agentkb.service.catalog import projects
from agentkb.service.catalog.agent_input import (
    AgentData,
    AgentInput,
    build_data,
    build_model,
    check_agent_binding,
    check_data_scope,
    data_of,
    params_of,
    prompt_of,
)
from agentkb.service.platform import access
from agentkb.storage import agents as repo
from agentkb.storage.agents import AgentRow
from agentkb.storage.db import Database
from agentkb.storage.projects import Project
from agentkb.validation import (
    check_name,
    is_identifier,
)


class AgentService:
    def __init__(self, db: Database, default_model: dict[str, Any], *, box: SecretBox | None = None) -> None:
        self.db = db
        self.default_model = default_model
        self.box = box or SecretBox.from_environment()

    def _shown(self, agent: AgentRow) -> AgentRow:
        return replace(agent, model=self.box.reveal(agent.model, f"agent {agent.name} model", strict=False))

    async def list(self, project_name: str) -> list[AgentRow]:
        access.require_project(project_name)

        async def listing() -> tuple[Project | None, list[AgentRow]]:
            async with self.db.read() as conn:
                return await repo.list_in_project(conn, project_name)

        return [self._shown(a) for a in await projects.rows_in_project(project_name, listing)]

    async def _stored(self, project_name: str, name: str) -> AgentRow:
        access.require_project(project_name)
        return await projects.named_in_project(
            self.db, project_name, name, repo.get_in_project, agent_not_found
        )

    async def get(self, project_name: str, name: str) -> AgentRow:
        return self._shown(await self._stored(project_name, name))

    async def run_data(self, project_name: str, data: Any) -> AgentData:
        """A query's `USING data = {...}` (MindsDB's per-query data): checked as an agent's `data` is, for one
        run in `project_name` (bare knowledge-base names are its)."""
        access.require_project(project_name)
        async with self.db.read() as conn:
            project = await projects.resolve(conn, project_name)
        built = build_data(data, project)
        check_data_scope(built)
        return built

    async def get_for_run(self, project_name: str, name: str) -> AgentRow:
        """The agent with the secrets of its model and params decrypted (`SecretUnavailable` if one cannot
        be): flat params such as `openai_api_key` reach the model too (`credentials.llm_config`)."""
        agent = await self._stored(project_name, name)
        return replace(
            agent,
            model=self.box.reveal(agent.model, f"agent {agent.name} model"),
            params=self.box.reveal(agent.params, f"agent {agent.name} params"),
        )

    async def create(self, project_name: str, given: AgentInput) -> AgentRow:
        access.require_write("creating an agent")
        access.require_project(project_name)
        name = check_name(given.name, "name")
        # Without a model, the default's name is recorded; its key and other settings apply at run time
        # (`credentials.llm_config`), so a changed default reaches the agent and its key stays out of records.
        model = build_model(given, self.default_model) or {
            k: self.default_model[k] for k in ("provider", "model_name") if k in self.default_model
        }
        prompt = prompt_of(given)
        params = params_of(given)
        refuse_sealed(model, None, "model.")
        refuse_sealed(params, None, "params.")
        try:
            async with self.db.transaction() as conn:
                project = await projects.resolve(conn, project_name)
                data = build_data(data_of(given) or {}, project)
                check_data_scope(data)
                values = {
                    "name": name,
                    "model": self.box.seal(model),
                    "data": data,
                    "prompt_template": prompt,
                    "params": self.box.seal(params),
                }
                agent = await repo.insert_new(conn, project.id, values)
        except IntegrityError as exc:  # the project was deleted while we inserted
            raise project_not_found(project_name) from exc
        if agent is None:
            raise Conflict(
                f"Agent with name {name} already exists. Please choose a different one.",
                title="Agent already exists",
            )
        return self._shown(agent)

    async def update(self, project_name: str, name: str, given: AgentInput) -> AgentRow:
        access.require_write("updating an agent")
        access.require_project(project_name)
        model = build_model(given, self.default_model)
        prompt = prompt_of(given)
        new_name = check_name(given.name, "name") if given.name is not None else None
        async with self.db.transaction() as conn:
            project = await projects.resolve(conn, project_name)
            agent = await repo.get(conn, project.id, name, for_update=True) if is_identifier(name) else None
            if agent is None:
                raise agent_not_found(name)
            values: dict[str, Any] = {}
            if new_name is not None and new_name != agent.name:
                if await repo.get(conn, project.id, new_name) is not None:
                    raise Conflict(f"Agent with name {new_name} already exists", title="Agent already exists")
                values["name"] = new_name
            new_model, new_params = agent.model, agent.params
            if model is not None:
                new_model = restore_masked(model, agent.model)
                values["model"] = self.box.seal(new_model)
            data = data_of(given)
            if data is not None:
                values["data"] = build_data(data, project)
                check_data_scope(values["data"])
            if prompt is not None:
                values["prompt_template"] = prompt
            given_params = params_of(given)  # checked once; {} when none were sent
            if given.params is not None:
                merged = {**agent.params, **restore_masked(given_params, agent.params)}
                new_params = {k: v for k, v in merged.items() if v is not None}
                values["params"] = self.box.seal(new_params)
            check_agent_binding(agent, new_model, new_params, model or {}, given_params)
            try:
                async with conn.begin_nested():
                    return self._shown(await repo.update(conn, agent.id, values))
            except IntegrityError as exc:  # a concurrent rename took the name
                raise Conflict(
                    f"Agent with name {new_name} already exists", title="Agent already exists"
                ) from exc

    async def delete(self, project_name: str, name: str) -> None:
        access.require_write("deleting an agent")
        access.require_project(project_name)
        async with self.db.transaction() as conn:
            project = await projects.resolve(conn, project_name)
            agent = await repo.get(conn, project.id, name, for_update=True) if is_identifier(name) else None
            if agent is None:
                raise agent_not_found(name)
            await repo.delete(conn, agent.id)
