"""Ollama through its OpenAI-compatible API (`model.base_url`, default the local server)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkb.agents.providers.base import ProviderContext, register
from agentkb.agents.providers.openai import PLACEHOLDER_KEY

if TYPE_CHECKING:
    from pydantic_ai.models import Model

DEFAULT_BASE_URL = "http://127.0.0.1:11434/v1"


@register("ollama")
def ollama_model(context: ProviderContext) -> Model:
    from pydantic_ai.models.openai import OpenAIChatModel  # imported on first use: the SDK is heavy
    from pydantic_ai.providers.openai import OpenAIProvider

    base_url = context.base_url or DEFAULT_BASE_URL
    key = context.api_key or PLACEHOLDER_KEY
    provider = OpenAIProvider(base_url=base_url, api_key=key, http_client=context.http_client)
    return OpenAIChatModel(context.model_name, provider=provider)
