"""Anthropic (Claude) through pydantic-ai's own model."""

from __future__ import annotations

from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider

from agentkb.agents.providers.base import ProviderContext, register


@register("anthropic")
def anthropic_model(context: ProviderContext) -> Model:
    key = context.require_api_key("ANTHROPIC_API_KEY")
    provider = AnthropicProvider(api_key=key, base_url=context.base_url, http_client=context.http_client)
    return AnthropicModel(context.model_name, provider=provider)
