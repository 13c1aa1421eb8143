"""The OpenAI-compatible door: `GET /v1/models` (the agents) and `POST /v1/chat/completions` (run one), so
that any OpenAI client (Open WebUI, the `openai` SDK, LangChain's `ChatOpenAI`) can talk to the agents.

Responses are OpenAI's shapes: `chat.completion`, or with `stream: true` server-sent
`chat.completion.chunk` events ending with `data: [DONE]`; errors are `{"error": {"message", "type",
"param", "code"}}` (401s included, see `api/auth.py`). The agent's tool steps, citations and trace id ride
in an extra `agentkb` field, which OpenAI clients ignore: on the completion, and on the stream's chunks as
each tool step finishes. The run is the completion service's (`service/agents/openai_compat.py`).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON, problems, schema_ref
from agentkb.api.sse import sse_stream
from agentkb.errors import AgentKBError, BadRequest
from agentkb.secrecy import mask_text
from agentkb.service.agents import ChatService, step_record
from agentkb.service.platform import RUN_STOPPED, Encoder, data, relay
from agentkb.service.types import Delta, End, Error, Event, Output, Start, Step

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
            events = await services.chat.stream(body.model, body.messages, stream_text=True)
        else:
            run = await services.chat.complete(body.model, body.messages)
    except AgentKBError as exc:
        return _from(exc)
    created = int(time.time())
    if body.stream:
        include_usage = bool((body.stream_options or {}).get("include_usage"))
        encoder = ChatChunks(services.chat, body.model, created, include_usage)
        return sse_stream(relay(events, services.shutdown.stopping, encoder))
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


class ChatChunks(Encoder[Event]):
    """`chat.completion.chunk` events for a run's events; a failure or the server shutting down becomes an
    `{"error": ...}` event; then the usage chunk (when asked for) and `[DONE]`.

    The model's text comes as it is written: one chunk per model delta. A response that then calls a tool
    has had its text (the model's thought) sent too — nothing could tell yet that it was not the answer —
    so the next response's text starts after a blank line. The answer is sent whole at the end only when it
    was not streamed (a model that cannot stream, rows), or what of it was not."""

    def __init__(self, chat: ChatService, model: str, created: int, include_usage: bool) -> None:
        self.chat = chat
        self.model = model
        self.include_usage = include_usage
        self.trace_id = ""
        self.ended = False
        self.sent = False  # some content went out
        self.response = 0  # the model response whose text is streaming
        self.streamed = ""  # that response's text so far
        self.base: dict[str, Any] = {
            "id": "",
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
        }

    def _chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return data({**self.base, "choices": [choice], **extra})

    def item(self, item: Event) -> list[str]:
        if isinstance(item, Start):
            self.trace_id = item.trace_id
            self.base["id"] = f"chatcmpl-{self.trace_id}"
            return [self._chunk({"role": "assistant", "content": ""}, agentkb={"trace_id": self.trace_id})]
        if isinstance(item, Delta):
            return [self._content(item)]
        if isinstance(item, Step):
            return [self._chunk({}, agentkb={"step": step_record(item)})]
        if isinstance(item, Output):
            extension = {"sources": [dict(s) for s in item.sources], "context": list(item.context)}
            rest = self._rest(item)
            return [
                self._chunk({"content": rest} if rest else {}, agentkb=extension),
                self._chunk({}, "stop"),
            ]
        if isinstance(item, Error):
            return [data(error_body(502, item.content, code=item.error_type))]
        if isinstance(item, End):
            self.ended = True  # the trace is stored: its usage can be read
        return []

    def _content(self, delta: Delta) -> str:
        text = delta.text
        if delta.response != self.response:  # a new model response: its text after a blank line
            self.response, self.streamed = delta.response, ""
            if self.sent:
                text = "\n\n" + text
        self.streamed += delta.text
        self.sent = True
        return self._chunk({"content": text})

    def _rest(self, output: Output) -> str:
        """What of the answer the client has not been sent."""
        if output.streamed:
            return ""
        if self.streamed and output.answer.startswith(self.streamed):
            return output.answer[len(self.streamed) :]
        return ("\n\n" if self.sent else "") + output.answer

    def ends(self, item: Event) -> bool:
        return isinstance(item, End)

    async def stopped(self) -> list[str]:
        return [data(error_body(503, RUN_STOPPED))]

    def failed(self, exc: Exception) -> list[str]:
        log.error("chat completion stream failed", exc_info=exc)
        return [data(error_body(500, str(exc)))]

    async def last(self) -> list[str]:
        chunks = []
        if self.include_usage and self.ended:
            usage = await self.chat.usage(self.model, self.trace_id)
            chunks.append(data({**self.base, "choices": [], "usage": usage.as_dict()}))
        return [*chunks, "data: [DONE]\n\n"]
