"""One request to a model, without an agent or tools (an LLM writing a chunk's context, or test questions):
pydantic-ai's direct API, imported on the first request (a large import)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings


async def ask_model(model: Model, prompt: str, settings: ModelSettings, *, system: str | None = None) -> str:
    """The text `model` answers to `prompt` (after `system`, if given); "" when it wrote none."""
    from pydantic_ai.direct import model_request
    from pydantic_ai.messages import ModelRequest, ModelRequestPart, SystemPromptPart, UserPromptPart

    parts: list[ModelRequestPart] = [SystemPromptPart(system)] if system is not None else []
    parts.append(UserPromptPart(prompt))
    response = await model_request(model, [ModelRequest(parts=parts)], model_settings=settings)
    return response.text or ""
