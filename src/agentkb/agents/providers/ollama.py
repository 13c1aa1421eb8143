"""Ollama through its OpenAI-compatible API (`model.base_url`, default the local server)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkb.agents.providers.base import ProviderContext, register
from agentkb.agents.providers.openai import PLACEHOLDER_KEY, chat_model

if TYPE_CHECKING:
    from pydantic_ai.models import Model

DEFAULT_BASE_URL = "http://127.0.0.1:11434/v1"


@register("ollama")
def ollama_model(context: ProviderContext) -> Model:
    return chat_model(context, context.base_url or DEFAULT_BASE_URL, context.api_key or PLACEHOLDER_KEY)
