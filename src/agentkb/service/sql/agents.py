"""MindsDB's agent statements: CREATE AGENT, ALTER AGENT / UPDATE AGENT, DROP AGENT, and an agent queried as
a table (`SELECT answer FROM <agent> WHERE question = '...' [USING ...]`).

The statement handlers (`ddl`, `select`) call `AgentStatements`; answers are `(columns, rows)` for tables, affected rows for the
rest.

An agent as a table (MindsDB 25.14's ApplyPredictorRowStep, 26.1's select targets):
- `WHERE` is `question = '...'`, optionally `AND <column> = <value> ...`: the other columns travel with the
  question, as MindsDB passes the WHERE row to the agent, and come back as columns of the answer row;
- `USING timeout = n, max_iterations = n, prompt_template = '...', model = {...} | '<model name>',
  data = {"knowledge_bases": [...], "tables": [...]}` override the agent's settings for this query (a
  `model` naming another provider does not reuse the agent's key; one naming another server without its own
  key is a 400: `credentials.llm_config`; `data` replaces the agent's data, checked as an agent's is);
- selected columns beyond `answer`, `question` and the WHERE columns are asked of the model as structured
  output (one row per item it returns; MindsDB 26.1 fills columns the agent did not produce with NULL,
  and so does agentkb when the model answers in plain text);
- a run that times out answers MindsDB 25.14's timeout message as the answer, as MindsDB does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from agentkb.errors import AgentKBError, BadRequest, NotFound
from agentkb.service.agents.completions import AgentRunError, RunOptions
from agentkb.service.catalog.agent_input import AgentInput, check_model_fields
from agentkb.sql import names
from agentkb.validation import check_dict

if TYPE_CHECKING:
    from agentkb.service.agents.completions import CompletionService
    from agentkb.service.catalog.agents import AgentService

Table = tuple[list[str], list[list[Any]]]

ANSWER = "answer"
QUESTION = "question"
RUN_OPTIONS = ("timeout", "max_iterations", "prompt_template", "model", "data")
TIMEOUT_ANSWER = (  # MindsDB 25.14's LangchainAgent.run_agent
    "I'm sorry! I couldn't generate a response within the allotted time ({seconds} seconds). "
    "If you need more time for processing, you can adjust the timeout settings. "
    "Please refer to the documentation for instructions on how to change the timeout value. "
    "Feel free to try your request again."
)


def _agent_input(name: str | None, options: dict[str, Any]) -> AgentInput:
    """MindsDB's USING parameters: `model` as an object or a model name, `provider`, `model_name`, `data`,
    `prompt_template`; every other key is an agent parameter (flat LLM settings such as `openai_api_key`
    and `base_url` included: they reach the model at run time)."""
    model = options.pop("model", None)
    return AgentInput(
        name=name,
        model=model if isinstance(model, dict) else None,
        model_name=model if isinstance(model, str) else options.pop("model_name", None),
        provider=options.pop("provider", None),
        data=options.pop("data", None),
        prompt_template=options.pop("prompt_template", None),
        params=options or None,
    )


def _where_row(where: ast.ASTNode | None, agent: str, project: str) -> dict[str, Any]:
    """`question = '...' [AND col = value ...]` as the row handed to the agent."""
    row: dict[str, Any] = {}
    pending = [where] if where is not None else []
    while pending:
        node = pending.pop(0)
        if isinstance(node, ast.BinaryOperation) and node.op.lower() == "and":
            pending[:0] = list(node.args)
            continue
        if (
            isinstance(node, ast.BinaryOperation)
            and node.op == "="
            and isinstance(node.args[0], ast.Identifier)
            and isinstance(node.args[1], ast.Constant)
        ):
            row[str(node.args[0].parts[-1]).lower()] = node.args[1].value
            continue
        shown = node.to_string() if isinstance(node, ast.ASTNode) else str(node)
        raise BadRequest(
            f"Unsupported condition on agent {agent}: {shown}. Query an agent with: "
            f"SELECT answer FROM {project}.{agent} WHERE question = '...' [AND <column> = <value> ...]"
        )
    if not isinstance(row.get(QUESTION), str) or not row[QUESTION]:
        raise BadRequest(
            f"Query agent {agent} with: SELECT answer FROM {project}.{agent} WHERE question = '...'"
        )
    return row


def _run_options(
    using: Mapping[str, Any] | None, columns: tuple[str, ...], data: dict[str, list[str]] | None
) -> RunOptions:
    given = {str(k).lower(): v for k, v in (using or {}).items()}
    unknown = sorted(set(given) - set(RUN_OPTIONS))
    if unknown:
        raise BadRequest(
            f"USING {', '.join(unknown)} is not supported on an agent query; "
            f"supported: {', '.join(RUN_OPTIONS)}"
        )
    model = given.get("model")
    if isinstance(model, str):
        model = {"model_name": model}
    elif model is not None:
        model = check_dict(model, "model")
        check_model_fields(model, "USING model")
    prompt = given.get("prompt_template")
    if prompt is not None and not isinstance(prompt, str):
        raise BadRequest("USING prompt_template must be a string")
    return RunOptions(
        timeout=given.get("timeout"),
        max_iterations=given.get("max_iterations"),
        prompt_template=prompt,
        model=model,
        columns=columns,
        data=data,
    )


def _targets(select: ast.Select, inputs: list[str]) -> list[tuple[str, str]]:
    """(column, shown name) per selected column; `*` is the answer and the WHERE columns."""
    targets: list[tuple[str, str]] = []
    for target in select.targets:
        if isinstance(target, ast.Star):
            targets += [(c, c) for c in [ANSWER, *inputs]]
        elif isinstance(target, ast.Identifier):
            column = str(target.parts[-1])
            shown = str(target.alias.parts[-1]) if target.alias is not None else column
            targets.append((column.lower(), shown))
        else:
            raise BadRequest(f"Unsupported select target on an agent: {target.to_string()}")
    return targets


class AgentStatements:
    """The agent statements of `/api/sql/query`, over the agent and completion services."""

    def __init__(self, *, agents: AgentService, completions: CompletionService) -> None:
        self.agents = agents
        self.completions = completions

    async def create(self, create: ast.CreateAgent, db: str) -> int:
        project, name = names.two_part(create.name, db)
        options = dict(create.params or {})
        if create.model is not None:
            options["model"] = create.model
        try:
            await self.agents.create(project, _agent_input(name, options))
        except AgentKBError as exc:
            if not (create.if_not_exists and exc.status == 409):
                raise
        return 1

    async def update(self, update: ast.UpdateAgent, db: str) -> int:
        """`ALTER AGENT <a> USING ...` / `UPDATE AGENT <a> SET ...`: the given fields change; params merge
        (a NULL value removes one), as MindsDB's update_agent."""
        project, name = names.two_part(update.name, db)
        options = {str(k).lower(): v for k, v in (update.params or {}).items()}
        new_name = options.pop("name", None)
        if not options and new_name is None:
            raise BadRequest(f"ALTER AGENT {name} needs at least one parameter to change")
        await self.agents.update(project, name, _agent_input(new_name, options))
        return 1

    async def drop(self, drop: ast.DropAgent, db: str) -> int:
        project, name = names.two_part(drop.name, db)
        try:
            await self.agents.delete(project, name)
        except NotFound:
            if not getattr(drop, "if_exists", False):
                raise
            return 0
        return 1

    async def select(self, select: ast.Select, project: str, name: str) -> Table:
        agent = await self.agents.get(project, name)  # 404 "Agent not found" when it is neither KB nor agent
        row = _where_row(select.where, name, project)
        targets = _targets(select, list(row))
        wanted = tuple(dict.fromkeys(c for c, _ in targets if c not in row))
        structured = wanted if set(wanted) - {ANSWER} else ()  # beyond `answer`: ask for rows
        using = {str(k).lower(): v for k, v in (select.using or {}).items()}
        data = None if using.get("data") is None else await self.agents.run_data(project, using["data"])
        options = _run_options(using, structured, data)
        message = {**row, "answer": None}
        try:
            reply = await self.completions.complete(project, name, [message], options)
            answers: list[dict[str, Any]] = reply["message"].get("rows") or [
                {ANSWER: reply["message"]["content"]}
            ]
        except AgentRunError as exc:
            if exc.error_type != "timeout":
                raise
            seconds = self.completions.timeout_s(agent.params, options)
            answers = [{ANSWER: TIMEOUT_ANSWER.format(seconds=f"{seconds:g}")}]
        rows = [{**answer, **row} for answer in answers]
        return [shown for _, shown in targets], [[r.get(column) for column, _ in targets] for r in rows]
