"""Ollama through its OpenAI-compatible API (`model.base_url`, default the local server)."""

from __future__ import annotations

from pydantic_ai.models import Model
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from agentkb.agents.providers.base import ProviderContext, register
from agentkb.agents.providers.openai import PLACEHOLDER_KEY

DEFAULT_BASE_URL = "http://127.0.0.1:11434/v1"


@register("ollama")
def ollama_model(context: ProviderContext) -> Model:
    base_url = context.base_url or DEFAULT_BASE_URL
    key = context.api_key("OLLAMA_API_KEY") or PLACEHOLDER_KEY
    provider = OpenAIProvider(base_url=base_url, api_key=key, http_client=context.http_client)
    return OpenAIChatModel(context.model_name, provider=provider)
