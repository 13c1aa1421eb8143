"""Google Gemini (Gemini API) through pydantic-ai's own model."""

from __future__ import annotations

from pydantic_ai.models import Model
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.providers.google import GoogleProvider

from agentkb.agents.providers.base import ProviderContext, register


@register("google")
def google_model(context: ProviderContext) -> Model:
    key = context.require_api_key("GEMINI_API_KEY", "GOOGLE_API_KEY")
    provider = GoogleProvider(api_key=key, base_url=context.base_url, http_client=context.http_client)
    return GoogleModel(context.model_name, provider=provider)
