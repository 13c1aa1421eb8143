"""OpenAI, and any OpenAI-compatible server (`model.base_url`), over Chat Completions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkb.agents.providers.base import ProviderContext, register

if TYPE_CHECKING:
    from pydantic_ai.models import Model

# OpenAI's client needs a non-empty key even for local servers that take none.
PLACEHOLDER_KEY = "api-key-not-set"


@register("openai")
def openai_model(context: ProviderContext) -> Model:
    from pydantic_ai.models.openai import OpenAIChatModel  # imported on first use: the SDK is heavy
    from pydantic_ai.providers.openai import OpenAIProvider

    key = context.api_key
    if key is None:  # another server, given without a key (`OPENAI_API_KEY` never goes to one)
        key = PLACEHOLDER_KEY if context.base_url else context.require_api_key("OPENAI_API_KEY")
    provider = OpenAIProvider(base_url=context.base_url, api_key=key, http_client=context.http_client)
    organization = context.model.get("organization")
    if organization:  # sent as the OpenAI-Organization header
        provider.client.organization = str(organization)
    return OpenAIChatModel(context.model_name, provider=provider)
