"""The OpenAI-compatible door: `GET /v1/models` (the agents) and `POST /v1/chat/completions` (run one), so
that any OpenAI client (Open WebUI, the `openai` SDK, LangChain's `ChatOpenAI`) can talk to the agents.

Responses are OpenAI's shapes: `chat.completion`, or with `stream: true` server-sent
`chat.completion.chunk` events ending with `data: [DONE]`; errors are `{"error": {"message", "type",
"param", "code"}}` (401s included, see `api/auth.py`). The agent's tool steps, citations and trace id ride
in an extra `agentkb` field, which OpenAI clients ignore: on the completion, and on the stream's chunks as
each tool step finishes. The run is the completion service's (`service/agents/openai_compat.py`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON, problems, schema_ref
from agentkb.api.sse import SHUTDOWN_MESSAGE, SSE_HEADERS
from agentkb.errors import AgentKBError, BadRequest
from agentkb.secrecy import mask_text
from agentkb.service.agents import ChatService, step_record
from agentkb.service.platform import until
from agentkb.service.types import End, Error, Event, Output, Start, Step

log = logging.getLogger("agentkb.api.openai")

OPENAI_PREFIX = "/v1/"
router = APIRouter(prefix="/v1", tags=["OpenAI-compatible"])

_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
}
_CODES = {401: "invalid_api_key", 404: "model_not_found"}


# --- the wire shapes (for the OpenAPI document) -------------------------------------------------------


class OpenAIErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAIError(BaseModel):
    """An error, as OpenAI answers it."""

    error: OpenAIErrorDetail


class ModelCard(BaseModel):
    id: str = Field(description="`<project>.<agent>`, or the agent's name alone in the default project.")
    object: Literal["model"] = "model"
    created: int
    owned_by: str = Field(description="The project.")


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ChatRequest(BaseModel):
    """OpenAI's chat request; fields other than these (temperature, tools, ...) are accepted and ignored:
    the agent's own model settings and tools apply."""

    model_config = ConfigDict(extra="allow")
    model: str = Field(description="An agent, as `/v1/models` lists it.")
    messages: list[dict[str, Any]] = Field(
        min_length=1,
        description="`{role: system|developer|user|assistant, content}`; the last user message asks.",
    )
    stream: bool | None = False
    stream_options: dict[str, Any] | None = Field(
        None, description="`{include_usage: true}` adds a usage chunk."
    )


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int
    message: AssistantMessage
    finish_reason: str
    logprobs: None = None


class ChatUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: ChatUsage
    agentkb: dict[str, Any] = Field(
        description="The run: `trace_id`, tool `steps` ({tool, tool_input, observation}), cited `sources` "
        "and retrieved `context`. OpenAI clients ignore it."
    )


def _error_doc(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema_ref(OpenAIError)}}}


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _error_doc("Invalid request: the body, `model` or `messages`"),
    401: _error_doc("No valid credential (when authentication is on)"),
    404: _error_doc("No agent is that model"),
    **problems(413),
    502: _error_doc("The agent's run failed (its LLM provider, a timeout)"),
}


# --- errors -------------------------------------------------------------------------------------------


def error_body(
    status: int, message: str, *, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    kind = _TYPES.get(status, "server_error")
    return {"error": {"message": mask_text(message), "type": kind, "param": param, "code": code}}


def openai_error(
    status: int, message: str, *, code: str | None = None, param: str | None = None
) -> JSONResponse:
    response = JSONResponse(error_body(status, message, code=code or _CODES.get(status), param=param), status)
    if status >= 500:
        response.headers["x-should-retry"] = "false"  # an agent run is not repeated behind the caller's back
    return response


def _from(exc: AgentKBError) -> JSONResponse:
    param = "model" if exc.status == 404 else "messages" if "messages" in exc.detail else None
    return openai_error(exc.status, exc.detail, code=getattr(exc, "error_type", None), param=param)


async def _request(request: Request) -> ChatRequest:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("The body must be a JSON object") from None
    try:
        return ChatRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise BadRequest(f"'{where}': {first['msg']}") from None


# --- routes -------------------------------------------------------------------------------------------


@router.get("/models", response_model=ModelList, responses={401: _ERRORS[401]})
async def list_models(services: ServicesDep) -> Any:
    """Every agent as a model: `<project>.<agent>`, the bare name for the default project's agents."""
    models = await services.chat.models()
    data = [
        {"id": m.id, "object": "model", "created": int(m.agent.created_at.timestamp()), "owned_by": m.project}
        for m in models
    ]
    return JSON({"object": "list", "data": data})


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    responses={
        200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}},
        **_ERRORS,
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": schema_ref(ChatRequest, "ChatCompletionRequest")}},
        }
    },
)
async def chat_completions(request: Request, services: ServicesDep) -> Response:
    """Run the agent named by `model` over the conversation: an answer (`chat.completion`), or with
    `stream: true` its chunks (`chat.completion.chunk`), each tool step in a chunk's `agentkb.step`, then
    `data: [DONE]`. A run that fails is a 502 (while streaming: an `{"error": ...}` event)."""
    try:
        body = await _request(request)
        if body.stream:
            events = await services.chat.stream(body.model, body.messages)
        else:
            run = await services.chat.complete(body.model, body.messages)
    except AgentKBError as exc:
        return _from(exc)
    created = int(time.time())
    if body.stream:
        include_usage = bool((body.stream_options or {}).get("include_usage"))
        chunks = _chunks(
            services.chat, body.model, events, created, include_usage, services.shutdown.stopping
        )
        return StreamingResponse(chunks, media_type="text/event-stream", headers=SSE_HEADERS)
    completion = {
        "id": f"chatcmpl-{run.trace_id}",
        "object": "chat.completion",
        "created": created,
        "model": body.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": run.answer},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": run.usage.as_dict(),
        "agentkb": run.extension(),
    }
    return JSON(completion)


def _data(obj: Any) -> str:
    return f"data: {json.dumps(obj)}\n\n"


async def _chunks(
    chat: ChatService,
    model: str,
    events: AsyncIterator[Event],
    created: int,
    include_usage: bool,
    stop: asyncio.Event,
) -> AsyncIterator[str]:
    """`chat.completion.chunk` events for a run's events, then `[DONE]`. Closing this closes the run."""
    trace_id = ""
    ended = False
    base: dict[str, Any] = {"id": "", "object": "chat.completion.chunk", "created": created, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        return _data({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})

    try:
        async with aclosing(until(events, stop)) as running:
            async for event in running:
                if isinstance(event, Start):
                    trace_id = event.trace_id
                    base["id"] = f"chatcmpl-{trace_id}"
                    yield chunk({"role": "assistant", "content": ""}, agentkb={"trace_id": trace_id})
                elif isinstance(event, Step):
                    yield chunk({}, agentkb={"step": step_record(event)})
                elif isinstance(event, Output):
                    extension = {"sources": [dict(s) for s in event.sources], "context": list(event.context)}
                    yield chunk({"content": event.answer}, agentkb=extension)
                    yield chunk({}, "stop")
                elif isinstance(event, Error):
                    yield _data(error_body(502, event.content, code=event.error_type))
                elif isinstance(event, End):
                    ended = True  # the trace is stored: its usage can be read
                    break
    except (asyncio.CancelledError, GeneratorExit):
        raise  # the client went away: nobody to tell
    except Exception as exc:  # the server shutting down, or an unexpected failure
        stopping = stop.is_set()
        if not stopping:
            log.exception("chat completion stream failed")
        yield _data(error_body(503 if stopping else 500, SHUTDOWN_MESSAGE if stopping else str(exc)))
    if include_usage and ended:
        usage = await chat.usage(model, trace_id)
        yield _data({**base, "choices": [], "usage": usage.as_dict()})
    yield "data: [DONE]\n\n"
