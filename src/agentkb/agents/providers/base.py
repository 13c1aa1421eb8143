"""The provider registry: a provider name (the agent's `model.provider`) → a factory of pydantic-ai models.

Each provider module registers itself with `@register("name")`; `build_model` looks the name up.
A factory gets a `ProviderContext` (the model as `credentials.llm_config` resolved it: its key and base
URL already chosen; the shared HTTP client; the agent's resolved data) and returns a pydantic-ai `Model`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from agentkb.errors import BadRequest

if TYPE_CHECKING:
    import httpx2
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings


class ModelClient:
    """The one HTTP client of the LLM providers, made when a model is first built (pydantic-ai's defaults:
    timeouts, pool limits, user agent) over `transport()`: pydantic-ai is a large import, which a process
    that never calls a model does not pay. Its owner (the runtime) closes it."""

    def __init__(self, transport: Callable[[], httpx2.AsyncBaseTransport]) -> None:
        self._transport = transport
        self._client: httpx2.AsyncClient | None = None

    def client(self) -> httpx2.AsyncClient:
        if self._client is None:
            from pydantic_ai.models import create_async_httpx2_client

            self._client = create_async_httpx2_client(transport=self._transport())
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


class MissingCredentials(Exception):
    """No API key for a provider that needs one (reported as an `authentication` error)."""


@dataclass(frozen=True, slots=True)
class ProviderContext:
    model: dict[str, Any]
    http_client: httpx2.AsyncClient
    kb_names: list[str] = field(default_factory=list)
    table_names: list[str] = field(default_factory=list)

    @property
    def model_name(self) -> str:
        return str(self.model.get("model_name") or "")

    @property
    def base_url(self) -> str | None:
        value = self.model.get("base_url")
        return str(value) if value else None

    @property
    def api_key(self) -> str | None:
        """The key `credentials.llm_config` resolved for this model and base URL (None: there is none)."""
        value = self.model.get("api_key")
        return str(value) if value else None

    def require_api_key(self, *env_vars: str) -> str:
        if self.api_key is None:
            provider = self.model.get("provider")
            where = f" or the {' / '.join(env_vars)} environment variable" if env_vars else ""
            raise MissingCredentials(
                f"No API key for provider {provider!r}: set 'model.api_key' on the agent{where}"
            )
        return self.api_key


ModelFactory = Callable[[ProviderContext], "Model"]

PROVIDERS: dict[str, ModelFactory] = {}


def register(name: str) -> Callable[[ModelFactory], ModelFactory]:
    def decorate(factory: ModelFactory) -> ModelFactory:
        PROVIDERS[name] = factory
        return factory

    return decorate


def provider_name(model: dict[str, Any]) -> str:
    """The agent's provider, checked against the registry (400 if unknown)."""
    name = str(model.get("provider") or "")
    if name not in PROVIDERS:
        raise BadRequest(
            f"Model provider {name!r} is not supported; use one of: {', '.join(sorted(PROVIDERS))}",
            title="Invalid model",
        )
    return name


def build_model(context: ProviderContext) -> Model:
    """The provider's model, its requests timed and counted by provider (agentkb.metrics)."""
    from agentkb.agents.providers.metered import MeteredModel  # pydantic-ai: imported on first use

    name = provider_name(context.model)
    return MeteredModel(PROVIDERS[name](context), name)


_FLOAT_SETTINGS = ("temperature", "top_p", "presence_penalty", "frequency_penalty", "timeout")
_INT_SETTINGS = ("max_tokens", "top_k", "seed", "max_retries")


def model_settings(model: dict[str, Any]) -> ModelSettings:
    """Sampling settings from the agent's model object (`temperature`, `max_tokens`, `top_p`, `top_k`, ...).
    Values of the wrong type are ignored rather than sent to the provider."""
    settings: dict[str, Any] = {}
    for key in _FLOAT_SETTINGS:
        value = model.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            settings[key] = float(value)
    for key in _INT_SETTINGS:
        value = model.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            settings[key] = value
    return cast("ModelSettings", settings)
