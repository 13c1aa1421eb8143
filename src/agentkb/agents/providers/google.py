"""Google Gemini (Gemini API) through pydantic-ai's own model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkb.agents.providers.base import ProviderContext, register

if TYPE_CHECKING:
    from pydantic_ai.models import Model


@register("google")
def google_model(context: ProviderContext) -> Model:
    from pydantic_ai.models.google import GoogleModel  # imported on first use: the SDK is heavy
    from pydantic_ai.providers.google import GoogleProvider

    key = context.require_api_key("GEMINI_API_KEY", "GOOGLE_API_KEY")
    provider = GoogleProvider(api_key=key, base_url=context.base_url, http_client=context.http_client)
    return GoogleModel(context.model_name, provider=provider)
