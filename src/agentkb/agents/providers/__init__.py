"""Language-model providers: `extractive` (no LLM), `openai` (and OpenAI-compatible servers), `anthropic`,
`google`, `ollama`, and OpenAI-compatible servers under MindsDB's other names (`compatible`: `vllm`,
`nvidia_nim`, `litellm`, `writer`). Importing the package registers them all."""

from agentkb.agents.providers import anthropic, compatible, extractive, google, ollama, openai
from agentkb.agents.providers.base import (
    PROVIDERS,
    MissingCredentials,
    ModelClient,
    ProviderContext,
    build_model,
    model_settings,
    provider_name,
)
from agentkb.agents.providers.direct import ask_model

__all__ = [
    "PROVIDERS",
    "MissingCredentials",
    "ModelClient",
    "ProviderContext",
    "anthropic",
    "ask_model",
    "build_model",
    "compatible",
    "extractive",
    "google",
    "model_settings",
    "ollama",
    "openai",
    "provider_name",
]
