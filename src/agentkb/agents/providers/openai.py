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
    key = context.api_key
    if key is None:  # another server, given without a key (`OPENAI_API_KEY` never goes to one)
        key = PLACEHOLDER_KEY if context.base_url else context.require_api_key("OPENAI_API_KEY")
    organization = context.model.get("organization")  # sent as the OpenAI-Organization header
    return chat_model(context, context.base_url, key, str(organization) if organization else None)


def chat_model(
    context: ProviderContext, base_url: str | None, key: str, organization: str | None = None
) -> Model:
    """pydantic-ai's Chat Completions model over `ChatClient` (the SDK's client, its parameters sent as
    given: see `openai_client`) on the shared HTTP client."""
    from pydantic_ai.models.openai import OpenAIChatModel  # imported on first use: the SDK is heavy
    from pydantic_ai.providers.openai import OpenAIProvider

    from agentkb.agents.providers.openai_client import ChatClient

    client = ChatClient(base_url=base_url, api_key=key, http_client=context.http_client)
    if organization:
        client.organization = organization
    return OpenAIChatModel(context.model_name, provider=OpenAIProvider(openai_client=client))
