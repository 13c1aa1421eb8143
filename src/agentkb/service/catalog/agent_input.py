"""Agent bodies as clients send them (`AgentInput`), checked and made into what an agent stores: its model
(the provider inferred from the model's name where not given), its connected data (knowledge bases and
tables, their names resolved in the agent's project), its prompt and its parameters; and the check that an
update moving the agent's model to another server sends the key for it (`check_agent_binding`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agentkb.credentials import model_params
from agentkb.destinations import check_model_urls
from agentkb.errors import BadRequest, NotFound
from agentkb.secrecy import carried_secrets, changed_endpoints, refuse, refuse_sealed
from agentkb.service.platform import access
from agentkb.storage.agents import AgentRow
from agentkb.storage.projects import Project
from agentkb.validation import IDENTIFIER, check_dict, check_storable, check_str_list

# agents/providers' registry; the last four are OpenAI-compatible servers under MindsDB's names
PROVIDERS = (
    "extractive",
    "openai",
    "anthropic",
    "google",
    "ollama",
    "vllm",
    "nvidia_nim",
    "litellm",
    "writer",
)
# agent parameters a run reads (beside the LLM's flat settings and credentials): `timeout` and
# `max_iterations` (completions), `mode` (text; 25.14's `retrieval`: its default prompt), `return_context`
# (true: what agentkb always does). 25.14's `is_demo` marks MindsDB's own demo objects: refused, as 26.1 does.
RUN_PARAMS = ("timeout", "max_iterations", "mode", "return_context")
MODES = ("text", "retrieval")
FIELD_CHECKED = ("extractive", "openai", "anthropic", "google", "ollama")  # `check_model_fields`
_PART = IDENTIFIER.pattern.strip("^$")
_NAME_PATTERN = r"[A-Za-z0-9_*?]*[*?][A-Za-z0-9_*?]*"  # MindsDB matches data names with fnmatch: kb_show*
_KB_REF = re.compile(rf"^(?:({_PART})\.)?({_PART}|{_NAME_PATTERN})$")
_TABLE_REF = re.compile(rf"^{_PART}(?:\.{_PART})?\.(?:{_PART}|{_NAME_PATTERN})$")
_PROVIDER_BY_PREFIX = (
    ("gpt", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("claude", "anthropic"),
    ("gemini", "google"),
    ("palmyra-x", "writer"),  # MindsDB's WRITER_CHAT_MODELS: palmyra-x5, palmyra-x4
)


AgentData = dict[str, list[str]]  # an agent's `data`: its knowledge bases and tables


@dataclass(frozen=True, slots=True)
class AgentInput:
    """An agent body as clients send it; None means "not sent" (the MindsDB SDK sends nulls)."""

    name: Any = None
    model: Any = None
    model_name: Any = None
    provider: Any = None
    data: Any = None
    prompt_template: Any = None
    params: Any = None


def _infer_provider(model_name: str, default: dict[str, Any]) -> str:
    lowered = model_name.lower()
    for prefix, provider in _PROVIDER_BY_PREFIX:
        if lowered.startswith(prefix):
            return provider
    return str(default.get("provider", "openai"))


def build_model(given: AgentInput, default: dict[str, Any]) -> dict[str, Any] | None:
    """Fold `model`, top-level `model_name`/`provider` and `params.model` into one model object."""
    model = given.model
    params_model = given.params.get("model") if isinstance(given.params, dict) else None
    if model is None and params_model is not None:
        model = params_model
    if model is None and given.model_name is None and given.provider is None:
        return None
    out = dict(check_dict(model, "model")) if model is not None else {}
    if given.model_name is not None:
        out.setdefault("model_name", given.model_name)
    if given.provider is not None:
        out.setdefault("provider", given.provider)
    provider = out.get("provider")
    model_name = out.get("model_name")
    if model_name is None and (provider is None or provider == default.get("provider")):
        out["model_name"] = model_name = default.get("model_name")
    if not isinstance(model_name, str) or not model_name:
        raise BadRequest(
            "'model.model_name' is required and must be a non-empty string", title="Invalid model"
        )
    if provider is None:
        out["provider"] = provider = _infer_provider(model_name, default)
    if provider == "mindsdb":  # a MindsDB model: agentkb has none, so it cannot exist (MindsDB's 404)
        raise NotFound(
            f'The model "{model_name}" does not exist. Please ensure that the name is correct and try again.',
            title="Resource not found",
        )
    if provider not in PROVIDERS:
        raise BadRequest(
            f"'model.provider' {provider!r} is not supported; use one of: {', '.join(PROVIDERS)}",
            title="Invalid model",
        )
    check_storable(out, "model")  # top-level `model_name` / `provider` are folded in unchecked above
    check_model_fields(out, "model")
    check_model_urls(out, "model")
    return out


def check_model_fields(model: dict[str, Any], where: str) -> None:
    """400 naming a field of an agent's model that its provider does not read: the providers here read the
    provider, the model name, credentials (`api_key`, `base_url`, `<provider>_api_key`, `organization`) and
    the sampling settings and `timeout` of every request (`agents.providers.model_settings`)."""
    if model.get("provider") not in FIELD_CHECKED:
        return  # a provider whose fields are its own module's to check
    for key, value in model.items():
        if value is None or key in ("provider", "model_name", "timeout") or model_params({key: value}):
            continue
        hint = " (it is Azure OpenAI's)" if key == "api_version" else ""
        raise BadRequest(
            f"'{where}.{key}' is not supported by provider {model.get('provider')!r}{hint}; a model takes "
            "provider, model_name, api_key, base_url, timeout and the sampling settings (temperature, "
            "max_tokens, top_p, ...)",
            title="Invalid model",
        )


def build_data(data: Any, project: Project) -> dict[str, list[str]]:
    """Validate `data`; bare knowledge-base names (the SDK appends them) become `<project>.<kb>`."""
    data = check_dict(data, "data")
    unknown = set(data) - {"knowledge_bases", "tables"}
    if unknown:
        raise BadRequest(
            f"'data' has unknown field(s) {sorted(unknown)}; allowed: knowledge_bases, tables",
            title="Invalid data",
        )
    kbs: list[str] = []
    for entry in check_str_list(data.get("knowledge_bases") or [], "data.knowledge_bases"):
        match = _KB_REF.match(entry)
        if match is None:
            raise BadRequest(
                f"'data.knowledge_bases' entry {entry!r} must be '<project>.<knowledge_base>', "
                "'<project>.*' or a name pattern such as 'kb_*'",
                title="Invalid data",
            )
        full = entry if match.group(1) else f"{project.name}.{entry}"
        if full not in kbs:
            kbs.append(full)
    tables: list[str] = []
    for entry in check_str_list(data.get("tables") or [], "data.tables"):
        if _TABLE_REF.match(entry) is None:
            raise BadRequest(
                f"'data.tables' entry {entry!r} must be '<data_source>.<table>', '<data_source>.*' or a "
                "name pattern such as 'files.sales_*'",
                title="Invalid data",
            )
        if entry not in tables:
            tables.append(entry)
    return {"knowledge_bases": kbs, "tables": tables}


def check_data_scope(data: dict[str, list[str]]) -> None:
    """A project key's agent reads its own projects' knowledge bases only, and no data source or file tables
    (global objects): 403 otherwise."""
    for entry in data["knowledge_bases"]:
        match = _KB_REF.match(entry)
        access.require_project((match.group(1) if match and match.group(1) else entry).strip("`"))
    if data["tables"]:
        access.require_global("an agent reading data source or file tables")


def _check_param(key: str, value: Any) -> None:
    """An agent parameter agentkb applies (`RUN_PARAMS`, and the flat LLM settings and credentials that
    `credentials.llm_config` lays under the model), else a 400 naming it. None removes one (update)."""
    if value is None or model_params({key: value}):
        return
    if key not in RUN_PARAMS:
        hint = " (put it in 'model')" if key in ("provider", "model_name", "api_version") else ""
        raise BadRequest(
            f"Agent parameter '{key}' is not supported{hint}; an agent's parameters are model, data, "
            f"prompt_template, {', '.join(RUN_PARAMS)}, and its LLM's settings and credentials "
            "(temperature, max_tokens, ..., api_key, base_url, <provider>_api_key)",
            title="Invalid parameter",
        )
    if key == "mode" and value not in MODES:
        refused = (
            " (MindsDB 26.1's SQL mode answers with the rows of a SQL query it writes: agentkb's "
            "agents answer in text; select columns from an agent for rows)"
            if value == "sql"
            else ""
        )
        raise BadRequest(
            f"Agent parameter 'mode' {value!r} is not supported{refused}; use {' or '.join(map(repr, MODES))}",
            title="Invalid parameter",
        )
    if key == "return_context" and not isinstance(value, bool):
        raise BadRequest(f"Agent parameter '{key}' must be true or false", title="Invalid parameter")
    if key == "return_context" and value is False:
        raise BadRequest(
            "Agent parameter 'return_context' false is not supported: agentkb always returns the context "
            "(the passages an answer drew on); leave it out",
            title="Invalid parameter",
        )
    if key in ("timeout", "max_iterations") and (
        isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
    ):
        raise BadRequest(f"Agent parameter '{key}' must be a positive number", title="Invalid parameter")


def params_of(given: AgentInput) -> dict[str, Any]:
    if given.params is None:
        return {}
    params = dict(check_dict(given.params, "params"))
    for moved in ("model", "data", "prompt_template"):  # MindsDB accepts these inside params too
        params.pop(moved, None)
    for key, value in params.items():
        _check_param(key, value)
    check_model_urls(params, "params")  # flat LLM settings (`openai_api_base`, ...)
    return params


def prompt_of(given: AgentInput) -> str | None:
    value = given.prompt_template
    if value is None and isinstance(given.params, dict):
        value = given.params.get("prompt_template")
    if value is not None and not isinstance(value, str):
        raise BadRequest("'prompt_template' must be a string", title="Invalid value")
    return check_storable(value, "prompt_template")  # type: ignore[no-any-return]


def data_of(given: AgentInput) -> Any:
    if given.data is None and isinstance(given.params, dict):
        return given.params.get("data")
    return given.data


def check_agent_binding(
    agent: AgentRow,
    model: dict[str, Any],
    params: dict[str, Any],
    given_model: dict[str, Any],
    given_params: dict[str, Any],
) -> None:
    """400 when an update moves the agent's LLM to another server (its model and the flat params that
    reach the model, as `credentials.llm_config` merges them) but keeps a stored key it did not send."""
    refuse_sealed(given_model, agent.model, "model.")
    refuse_sealed(given_params, agent.params, "params.")
    old_params, new_params = model_params(agent.params), model_params(params)
    changed = changed_endpoints({**old_params, **agent.model}, {**new_params, **model})
    carried = [f"model.{k}" for k in carried_secrets(agent.model, model, given_model)]
    carried += [f"params.{k}" for k in carried_secrets(old_params, new_params, given_params)]
    refuse(changed, carried)
