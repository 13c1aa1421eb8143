"""A scripted OpenAI-compatible Chat Completions server for agent tests.

It runs uvicorn in a thread on a free loopback port. Each test queues the replies it wants with
`script(...)`; every request takes the next one (plain JSON, or SSE when the request says
`"stream": true`). Requests are recorded with their headers and JSON bodies.

    stub.script(tool_call("kb_query_tool", "SELECT ..."), text("The answer"))
    model = {"provider": "openai", "model_name": "gpt-stub", "api_key": "sk-x", "base_url": stub.base_url}
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass(frozen=True)
class ToolCall:
    name: str
    tool_input: str


@dataclass(frozen=True)
class Reply:
    """One scripted answer: text and/or tool calls, or an HTTP error; `delay` seconds before it is sent."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    status: int = 200
    error: str | None = None
    delay: float = 0.0


def text(content: str, *, delay: float = 0.0) -> Reply:
    return Reply(content=content, delay=delay)


def tool_call(name: str, tool_input: str, *, thought: str | None = None, delay: float = 0.0) -> Reply:
    return Reply(content=thought, tool_calls=(ToolCall(name, tool_input),), delay=delay)


def error(status: int, message: str, *, delay: float = 0.0) -> Reply:
    return Reply(status=status, error=message, delay=delay)


@dataclass
class Recorded:
    headers: dict[str, str]
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))


_ERROR_CODES = {401: "invalid_api_key", 403: "forbidden", 404: "model_not_found", 429: "rate_limit_exceeded"}


def _error_body(reply: Reply) -> dict[str, Any]:
    return {
        "error": {
            "message": reply.error,
            "type": "invalid_request_error",
            "param": None,
            "code": _ERROR_CODES.get(reply.status, "server_error"),
        }
    }


def _tool_calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{i}_{call.name}",
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps({"tool_input": call.tool_input})},
        }
        for i, call in enumerate(reply.tool_calls)
    ]


_USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def _completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = _tool_calls(reply)
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}
        ],
        "usage": _USAGE,
    }


def _chunks(reply: Reply, model: str) -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if reply.content:
        half = len(reply.content) // 2
        deltas += [{"content": reply.content[:half]}, {"content": reply.content[half:]}]
    for i, call in enumerate(_tool_calls(reply)):
        deltas.append({"tool_calls": [{"index": i, **call, "function": {**call["function"], "arguments": ""}}]})
        deltas.append({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]})
    chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    finish = "tool_calls" if reply.tool_calls else "stop"
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({**base, "choices": [], "usage": _USAGE})
    return chunks


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LLMStub:
    """The server. `base_url` ends in `/v1`; `requests` lists what it received, oldest first."""

    def __init__(self) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.requests: list[Recorded] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        app = Starlette(routes=[Route("/v1/chat/completions", self._handle, methods=["POST"])])
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the LLM stub did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def script(self, *replies: Reply) -> None:
        """Replace the queue of replies (and forget earlier requests)."""
        with self._lock:
            self._replies = deque(replies)
            self.requests = []

    def _next(self) -> Reply:
        with self._lock:
            return self._replies.popleft() if self._replies else text("(the stub has no scripted reply)")

    async def _handle(self, request: Request) -> Response:
        body = await request.json()
        with self._lock:
            self.requests.append(Recorded(headers=dict(request.headers), body=body))
        reply = self._next()
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.status != 200:
            return JSONResponse(_error_body(reply), status_code=reply.status)
        model = str(body.get("model", "stub"))
        if not body.get("stream"):
            return JSONResponse(_completion(reply, model))

        async def events() -> AsyncIterator[str]:
            for chunk in _chunks(reply, model):
                yield f"data: {json.dumps(chunk)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")
