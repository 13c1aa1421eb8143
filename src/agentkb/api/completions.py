"""Querying agents (spec §4.4, §6): `POST .../agents/{a}/completions`, `.../completions/stream`, and
`GET .../agents/{a}/traces/{trace_id}`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body
from fastapi.responses import StreamingResponse

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON, event_stream, problems
from agentkb.api.schemas import CompletionChunk, CompletionResponse, TraceRecord
from agentkb.api.sse import sse_response
from agentkb.errors import BadRequest
from agentkb.service.types import MESSAGES_REQUIRED

router = APIRouter(prefix="/api/projects/{project_name}/agents/{agent_name}", tags=["agents"])

_MESSAGES_EXAMPLE = {"messages": [{"question": "What is in the knowledge base?", "answer": ""}]}
MessagesBody = Annotated[Any, Body(examples=[_MESSAGES_EXAMPLE])]


def _messages(body: Any) -> list[Any]:
    """The body's `messages` (MindsDB: 400 'Must provide "messages" parameter in POST body')."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:
        raise BadRequest(MESSAGES_REQUIRED, title="Missing parameter")
    return messages


@router.post("/completions", response_model=CompletionResponse, responses=problems(400, 404, 413, 502))
async def completions(
    project_name: str,
    agent_name: str,
    services: ServicesDep,
    body: MessagesBody = None,
) -> Any:
    """The agent's answer: `{"message": {"role": "assistant", "content", "trace_id", "context", "sources"}}`.
    A failed or timed-out run is a 502 problem+json naming the provider's error."""
    return JSON(await services.completions.complete(project_name, agent_name, _messages(body)))


@router.post(
    "/completions/stream",
    response_class=StreamingResponse,
    responses={
        200: event_stream(
            CompletionChunk, "MindsDB's agent chunks, `data: <json>` each", name="CompletionChunk"
        ),
        **problems(400, 404, 413),
    },
)
async def completions_stream(
    project_name: str,
    agent_name: str,
    services: ServicesDep,
    body: MessagesBody = None,
) -> StreamingResponse:
    """Server-sent `data: <json>` chunks: start, (action, step)*, output or error, end. When the server
    shuts down mid-run, the run is cancelled and the stream ends with an error chunk and end."""
    events = await services.completions.stream(project_name, agent_name, _messages(body))
    return sse_response(events, services.shutdown.stopping)


@router.get("/traces/{trace_id}", response_model=TraceRecord, responses=problems(404))
async def get_trace(project_name: str, agent_name: str, trace_id: str, services: ServicesDep) -> Any:
    """One run: question, tool steps (input, observation, timing), answer or error, usage, status."""
    return JSON(await services.completions.trace(project_name, agent_name, trace_id))
