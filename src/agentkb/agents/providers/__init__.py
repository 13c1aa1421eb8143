"""Language-model providers: `extractive` (no LLM), `openai` (and OpenAI-compatible servers), `anthropic`,
`google`, `ollama`, and OpenAI-compatible servers under MindsDB's other names (`compatible`: `vllm`,
`nvidia_nim`, `litellm`, `writer`). Importing the package registers them all."""

from agentkb.agents.providers import anthropic, compatible, extractive, google, ollama, openai
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
    "compatible",
    "extractive",
    "google",
    "model_settings",
    "ollama",
    "openai",
    "provider_name",
]
