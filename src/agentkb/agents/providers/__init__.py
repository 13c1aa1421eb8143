"""Language-model providers: `extractive` (no LLM), `openai` (and OpenAI-compatible servers), `anthropic`,
`google` and `ollama`. Importing the package registers them all."""

from agentkb.agents.providers import anthropic, extractive, google, ollama, openai
from agentkb.agents.providers.base import (
    PROVIDERS,
    HTTPClient,
    MissingCredentials,
    ProviderContext,
    build_model,
    model_settings,
    provider_name,
)

__all__ = [
    "PROVIDERS",
    "HTTPClient",
    "MissingCredentials",
    "ProviderContext",
    "anthropic",
    "build_model",
    "extractive",
    "google",
    "model_settings",
    "ollama",
    "openai",
    "provider_name",
]
