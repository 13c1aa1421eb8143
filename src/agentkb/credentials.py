"""Provider credentials, given only to the provider and server they belong to.

`llm_config` is the one place that decides which API key and base URL an agent's LLM call uses;
`openai_env_key` is the embedders' and rerankers' rule for the server's `OPENAI_API_KEY`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from agentkb.secrecy import MASK, refuse

OPENAI_HOST = "api.openai.com"

# The environment keys of each provider, and the host they are for (None: only when no base_url is given).
ENV_KEYS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "openai": (("OPENAI_API_KEY",), OPENAI_HOST),
    "anthropic": (("ANTHROPIC_API_KEY",), "api.anthropic.com"),
    "google": (("GEMINI_API_KEY", "GOOGLE_API_KEY"), "generativelanguage.googleapis.com"),
    "ollama": (("OLLAMA_API_KEY",), None),
    "litellm": (("LITELLM_API_KEY",), None),
    "nvidia_nim": (("NVIDIA_NIM_API_KEY",), None),
    "writer": (("WRITER_API_KEY",), "api.writer.com"),
}

# MindsDB's spellings (25.14 `get_llm_config` / `get_api_key`, 26.1 `get_pydantic_ai_model_kwargs`): the
# generic name last, a provider's own spelling first.
_BASE_URL_KEYS = {
    "openai": ("openai_api_base", "base_url"),
    "anthropic": ("anthropic_api_url", "base_url"),
    "ollama": ("ollama_base_url", "base_url"),
    "vllm": ("openai_api_base", "base_url"),
    "litellm": ("litellm_api_base", "base_url"),
    "nvidia_nim": ("nvidia_nim_base_url", "base_url"),
}
# the key's spellings other than `<provider>_api_key` and `api_key` (MindsDB's vLLM takes OpenAI's)
_KEY_KEYS = {"vllm": ("vllm_api_key", "openai_api_key", "api_key")}
_ORGANIZATION_KEYS = ("openai_api_organization", "api_organization")
# Flat agent parameters that configure its LLM (MindsDB 25.14 hands an agent's flat params to the LLM);
# credentials are picked separately. `timeout` is left out: on an agent it is the run's deadline.
SETTING_KEYS = (
    "temperature",
    "max_tokens",
    "top_p",
    "top_k",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "max_retries",
)


def url_host(url: str | None) -> str | None:
    """The lower-cased host of `url`; None for no URL, one without a host, or one that does not parse."""
    if not url:
        return None
    try:
        return (urlsplit(url).hostname or "").lower() or None
    except ValueError:
        return None


def openai_env_key(base_url: str | None) -> str | None:
    """`OPENAI_API_KEY` for OpenAI itself (no base_url, or one on api.openai.com); never for another
    server named by `base_url`."""
    if base_url is None or url_host(base_url) == OPENAI_HOST:
        return os.environ.get("OPENAI_API_KEY") or None
    return None


def first_text(layer: Mapping[str, Any], *keys: str) -> str | None:
    """The first non-empty string among `layer[keys]`."""
    for key in keys:
        value = layer.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _credentials(provider: str, layer: Mapping[str, Any]) -> dict[str, str]:
    """The key, base URL and organization one layer gives for `provider` (MindsDB's spellings)."""
    found: dict[str, str] = {}
    key = first_text(layer, *_KEY_KEYS.get(provider, (f"{provider}_api_key", "api_key")))
    base_url = first_text(layer, *_BASE_URL_KEYS.get(provider, ("base_url",)))
    organization = first_text(layer, *_ORGANIZATION_KEYS) if provider == "openai" else None
    for name, value in (("api_key", key), ("base_url", base_url), ("organization", organization)):
        if value is not None:
            found[name] = value
    return found


def _is_credential(key: str) -> bool:
    return key.endswith(("api_key", "api_base", "api_url", "base_url", "organization"))


def model_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The flat agent parameters that reach its LLM: settings and credentials (`openai_api_key`, ...)."""
    return {
        k: v for k, v in (params or {}).items() if v is not None and (k in SETTING_KEYS or _is_credential(k))
    }


def _env_key(provider: str, base_url: str | None) -> str | None:
    names, host = ENV_KEYS.get(provider, ((), None))
    if base_url is not None and (host is None or url_host(base_url) != host):
        return None  # the server's key never goes to a server the agent names
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


def _same_server(a: str | None, b: str | None) -> bool:
    return (a or "").rstrip("/") == (b or "").rstrip("/")


def llm_config(
    model: Mapping[str, Any],
    params: Mapping[str, Any] | None = None,
    default: Mapping[str, Any] | None = None,
    override: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The model an agent run calls: `provider`, `model_name`, settings, and `api_key` / `base_url` /
    `organization` when there are any.

    Layers, lowest first: the server's default model (only when its provider is the agent's, as MindsDB
    26.1 merges `default_llm`), the agent (its flat LLM params under its `model` object, as MindsDB 25.14
    merges them), a per-query `model` override (alone when it names another provider). Settings merge key
    by key. Credentials never mix: key, base URL and organization come together from the highest layer
    that gives any of them, so a key is only ever sent to the server given with it. A per-query override
    of the agent's provider that gives credentials without a key uses the agent's stored key only for the
    agent's own server: naming another server is a 400 asking for its key (`******` gives nothing).
    Without a key, the provider's environment key (`OPENAI_API_KEY`, ...) is used only when no base URL is
    given or it is the provider's own host.
    """
    agent = {**model_params(params), **model}
    provider = str(agent.get("provider") or "")
    layers = [agent]
    stored_key: dict[str, str] = {}  # the agent's own credentials, when a same-provider override follows
    if override:
        override = {k: v for k, v in override.items() if v != MASK}
        override_provider = str(override.get("provider") or provider)
        if override_provider != provider:
            layers, provider = [], override_provider
        else:
            stored_key = _credentials(provider, agent)
        layers.append({**override, "provider": override_provider})
    if default and str(default.get("provider") or "") == provider:
        layers.insert(0, dict(default))
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update({k: v for k, v in layer.items() if v is not None and not _is_credential(k)})
    merged["provider"] = provider
    credentials: dict[str, str] = {}
    for layer in reversed(layers):
        credentials = _credentials(provider, layer)
        if credentials:
            break
    if stored_key.get("api_key") and credentials and "api_key" not in credentials:
        if not _same_server(credentials.get("base_url"), stored_key.get("base_url")):
            refuse(["base_url"], ["api_key"], "model.")  # the query's `USING model = {...}`
        credentials["api_key"] = stored_key["api_key"]
    if "api_key" not in credentials:
        env = _env_key(provider, credentials.get("base_url"))
        if env is not None:
            credentials["api_key"] = env
    return {**merged, **credentials}
