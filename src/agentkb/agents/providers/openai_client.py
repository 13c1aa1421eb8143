"""The OpenAI SDK client agents send Chat Completions through: the SDK's own, minus one cost.

Before it sends a request, `chat.completions.create` runs its parameters through the SDK's type-driven
transform (`openai._utils._transform`), which walks every message and tool schema against the parameter
types' unions — about 3.6 ms of CPU per request of an agent run with one tool result (a third of the SDK's
time per request, measured with py-spy), for no change: the Chat Completions parameter types carry no
aliases or formats (`PropertyInfo`) for it to apply. `ChatClient` hands `messages` and `tools` to the same
`create` as `extra_body` entries (sent as given, overriding the placeholders left in their named
arguments), so everything else — validation, headers, authentication, retries, streaming, response parsing
— stays the SDK's. Imported on first use (the SDK is heavy).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any

from openai import AsyncOpenAI, AsyncStream, Omit, omit
from openai.resources.chat import AsyncChat
from openai.resources.chat.completions import AsyncCompletions
from openai.types.chat import ChatCompletion, ChatCompletionChunk

# the parameters moved to the body as given; `messages` is required by `create`, so it keeps an empty list
_PASSED_AS_GIVEN: Mapping[str, Any] = {"messages": [], "tools": omit}


class _Completions(AsyncCompletions):
    async def create(  # type: ignore[override]
        self, *, extra_body: Mapping[str, object] | None = None, **params: Any
    ) -> ChatCompletion | AsyncStream[ChatCompletionChunk]:
        body: dict[str, object] = {}
        for name, placeholder in _PASSED_AS_GIVEN.items():
            value = params.get(name, omit)
            if value is not None and not isinstance(value, Omit):
                body[name] = value if isinstance(value, list) else list(_iterable(value))
                params[name] = placeholder
        return await super().create(extra_body={**body, **(extra_body or {})}, **params)  # type: ignore[no-any-return]


def _iterable(value: object) -> Iterable[object]:
    if not isinstance(value, Iterable):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


class _Chat(AsyncChat):
    @cached_property
    def completions(self) -> AsyncCompletions:
        return _Completions(self._client)


class ChatClient(AsyncOpenAI):
    """`AsyncOpenAI` whose `chat.completions.create` sends `messages` and `tools` untransformed."""

    @cached_property
    def chat(self) -> AsyncChat:
        return _Chat(self)

    @property
    def user_agent(self) -> str:
        """The SDK's (it names the client's class)."""
        return super().user_agent.replace(type(self).__name__, AsyncOpenAI.__name__, 1)
