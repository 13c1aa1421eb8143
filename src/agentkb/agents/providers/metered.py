"""A pydantic-ai model wrapper that records each request's latency and failures by provider
(`agentkb_llm_request_duration_seconds`, `agentkb_llm_errors_total`); `build_model` wraps every model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext

from agentkb import metrics


class MeteredModel(WrapperModel):
    """`wrapped`, with each request (plain or streamed, to its last chunk) timed under `provider`."""

    def __init__(self, wrapped: Model, provider: str) -> None:
        super().__init__(wrapped)
        self.metrics_provider = provider

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        with metrics.timed(metrics.llm_requests, metrics.llm_errors, self.metrics_provider):
            return await self.wrapped.request(messages, model_settings, model_request_parameters)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        with metrics.timed(metrics.llm_requests, metrics.llm_errors, self.metrics_provider):
            async with self.wrapped.request_stream(
                messages, model_settings, model_request_parameters, run_context
            ) as response_stream:
                yield response_stream
