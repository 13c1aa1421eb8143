"""A failed agent run's error event: its type (authentication, not_found, rate_limit, timeout, connection,
general) and a text naming the model provider, the model and the HTTP status."""

from __future__ import annotations

import httpx2
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelHTTPError,
    ModelNotFoundError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelRequestTimeout,
    ModelTimeoutError,
    UnexpectedModelBehavior,
)

from agentkb.agents.events import ErrorType
from agentkb.agents.providers import MissingCredentials


def classify(exc: BaseException, provider: str, model_name: str) -> tuple[ErrorType, str]:
    """An error event's type and text for a failed run, naming the provider and HTTP status."""
    who = f"Model provider {provider!r} (model {model_name!r})"
    if isinstance(exc, MissingCredentials):
        return "authentication", str(exc)
    if isinstance(exc, ModelHTTPError):
        body = exc.body
        detail = body.get("message") if isinstance(body, dict) else None
        detail = str(detail or body or exc.message)
        status = f"{who} returned HTTP {exc.status_code}: {detail}"
        if isinstance(exc, ModelAuthenticationError) or exc.status_code in (401, 403):
            return "authentication", status
        if isinstance(exc, ModelNotFoundError) or exc.status_code == 404:
            return "not_found", status
        if isinstance(exc, ModelRateLimitError | ModelQuotaExceededError) or exc.status_code == 429:
            return "rate_limit", status
        return "general", status
    if isinstance(exc, ModelRequestTimeout | ModelTimeoutError | httpx2.TimeoutException | TimeoutError):
        return "timeout", f"{who} timed out: {exc}"
    if isinstance(exc, ModelConnectionError | httpx2.TransportError | ConnectionError):
        return "connection", f"{who} could not be reached: {exc}"
    if isinstance(exc, ModelAuthenticationError):
        return "authentication", f"{who} rejected the credentials: {exc}"
    if isinstance(exc, ModelRateLimitError | ModelQuotaExceededError):
        return "rate_limit", f"{who} is rate limited: {exc}"
    if isinstance(exc, ModelNotFoundError):
        return "not_found", f"{who}: {exc}"
    if isinstance(exc, ModelAPIError):
        return "general", f"{who} failed: {exc}"
    if isinstance(exc, UnexpectedModelBehavior):
        return "general", f"{who} behaved unexpectedly: {exc}"
    return "general", f"The agent failed: {type(exc).__name__}: {exc}"
