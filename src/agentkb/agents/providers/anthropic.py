"""Anthropic (Claude) through pydantic-ai's own model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkb.agents.providers.base import ProviderContext, register

if TYPE_CHECKING:
    from pydantic_ai.models import Model


@register("anthropic")
def anthropic_model(context: ProviderContext) -> Model:
    from pydantic_ai.models.anthropic import AnthropicModel  # imported on first use: the SDK is heavy
    from pydantic_ai.providers.anthropic import AnthropicProvider

    key = context.require_api_key("ANTHROPIC_API_KEY")
    provider = AnthropicProvider(api_key=key, base_url=context.base_url, http_client=context.http_client)
    return AnthropicModel(context.model_name, provider=provider)
