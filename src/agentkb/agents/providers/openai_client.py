"""The OpenAI SDK client agents send Chat Completions through: the SDK's own, minus one cost.

Before it sends a request, `chat.completions.create` runs its parameters through the SDK's type-driven
transform (`openai._utils._transform`), which walks every message and tool schema against the parameter
types' unions — a large share of the SDK's CPU time per request of an agent run (as a profiler shows), for
no change: the Chat Completions parameter types carry no
aliases or formats (`PropertyInfo`) for it to apply. `ChatClient` hands the body's parameters to the same
`create` as `extra_body` entries (sent as given; omitted ones left out, as the transform leaves them), keeping
only `model`, `stream` and `response_format` (which `create` checks) as named arguments, so everything else —
validation, headers, authentication, retries, streaming, response parsing — stays the SDK's. A name `create`
does not take is still refused by it. Imported on first use (the SDK is heavy).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any

from openai import AsyncOpenAI, AsyncStream, NotGiven, Omit
from openai.resources.chat import AsyncChat
from openai.resources.chat.completions import AsyncCompletions
from openai.types.chat import ChatCompletion, ChatCompletionChunk

# named arguments `create` uses itself (the request's options, the stream switch, a checked format)
_KEPT = frozenset(
    {"model", "stream", "response_format", "extra_headers", "extra_query", "extra_body", "timeout"}
)
# the body's parameters: every other keyword-only parameter of `create`
_BODY = frozenset(
    name
    for name, parameter in inspect.signature(AsyncCompletions.create).parameters.items()
    if parameter.kind is inspect.Parameter.KEYWORD_ONLY and name not in _KEPT
)


class _Completions(AsyncCompletions):
    async def create(  # type: ignore[override]
        self, *, extra_body: Mapping[str, object] | None = None, **params: Any
    ) -> ChatCompletion | AsyncStream[ChatCompletionChunk]:
        body: dict[str, object] = {}
        for name in _BODY.intersection(params):
            value = params.pop(name)
            if not isinstance(value, Omit | NotGiven):
                body[name] = _json_ready(value)
        # `messages` is required by `create`: an empty list stands in, the body's entry wins
        return await super().create(messages=[], extra_body={**body, **(extra_body or {})}, **params)  # type: ignore[no-any-return]


def _json_ready(value: object) -> object:
    """As the transform leaves a value: an iterable that is not a list, str, bytes or mapping becomes a list."""
    if isinstance(value, Iterable) and not isinstance(value, list | str | bytes | Mapping):
        return list(value)
    return value


class _Chat(AsyncChat):
    @cached_property
    def completions(self) -> AsyncCompletions:
        return _Completions(self._client)


class ChatClient(AsyncOpenAI):
    """`AsyncOpenAI` whose `chat.completions.create` sends its body's parameters untransformed."""

    @cached_property
    def chat(self) -> AsyncChat:
        return _Chat(self)

    @property
    def user_agent(self) -> str:
        """The SDK's (it names the client's class)."""
        return super().user_agent.replace(type(self).__name__, AsyncOpenAI.__name__, 1)
