"""OpenAI, and any OpenAI-compatible server (`model.base_url`), over Chat Completions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkb.agents.providers.base import ProviderContext, register

if TYPE_CHECKING:
    from pydantic_ai.models import Model

OFFICIAL_HOST = "api.openai.com"
# OpenAI's client needs a non-empty key even for local servers that take none.
PLACEHOLDER_KEY = "api-key-not-set"


@register("openai")
def openai_model(context: ProviderContext) -> Model:
    from pydantic_ai.models.openai import OpenAIChatModel  # imported on first use: the SDK is heavy
    from pydantic_ai.providers.openai import OpenAIProvider

    official = context.base_url is None or OFFICIAL_HOST in context.base_url
    # OPENAI_API_KEY goes to OpenAI only, never to another server named by base_url
    key = context.api_key("OPENAI_API_KEY") if official else context.api_key()
    if key is None:
        key = PLACEHOLDER_KEY if context.base_url else context.require_api_key("OPENAI_API_KEY")
    provider = OpenAIProvider(base_url=context.base_url, api_key=key, http_client=context.http_client)
    return OpenAIChatModel(context.model_name, provider=provider)
