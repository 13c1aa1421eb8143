"""MindsDB's A2A (Agent2Agent protocol) endpoint, on by default as MindsDB's is: `POST /a2a/` (JSON-RPC 2.0),
the server's agent card at `/a2a/.well-known/agent.json` and `/a2a/.well-known/agent-card.json`, and
`GET /a2a/status`. One card for the server, as MindsDB's: a message names its agent in its metadata
(`agentName` / `agent_name`, MindsDB's keys). The runs and tasks are `service/agents/a2a.py`'s.

Methods: A2A 0.3's `message/send` and `message/stream` (what the `a2a-sdk` client sends to a card of
protocol 0.3, this one), MindsDB's `tasks/send`, `tasks/sendSubscribe` and `message/stream` (its `sessionId`,
parts typed by `type`), `tasks/get`, `tasks/cancel` (a finished task cannot be: -32002). Push notifications
are not supported (-32003), nor is resubscribing (-32004). Results are written once for both dialects: parts
carry `kind` and `type`, events `kind`, `taskId` and MindsDB's `id`. Streams are server-sent events, one
JSON-RPC response each: the task (`message/stream`), `working`, the answer as an artifact, and the final
status (`completed` with the answer as its message, or `failed` with the error).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from agentkb import __version__
from agentkb.api.a2a_wire import (
    A2AStatus,
    AgentCard,
    JSONRPCRequest,
    JSONRPCResponse,
    RPCError,
    artifact_update,
    send_request,
    status_update,
    task_record,
)
from agentkb.api.deps import ServicesDep
from agentkb.api.responses import event_stream, schema_ref
from agentkb.api.sse import sse_stream
from agentkb.errors import AgentKBError, NotFound
from agentkb.service.agents import A2ATask
from agentkb.service.platform import RUN_STOPPED, Encoder, data, relay
from agentkb.service.types import Error, Event, Output, Start

router = APIRouter(prefix="/a2a", tags=["A2A"])
STARTED = time.monotonic()
MODES = ["text", "text/plain"]
UNSUPPORTED = {
    "tasks/pushNotification/set": (-32003, "Push Notification is not supported"),
    "tasks/pushNotification/get": (-32003, "Push Notification is not supported"),
    "tasks/pushNotificationConfig/set": (-32003, "Push Notification is not supported"),
    "tasks/pushNotificationConfig/get": (-32003, "Push Notification is not supported"),
    "tasks/pushNotificationConfig/list": (-32003, "Push Notification is not supported"),
    "tasks/pushNotificationConfig/delete": (-32003, "Push Notification is not supported"),
    "tasks/resubscribe": (-32004, "This operation is not supported"),
    "agent/getAuthenticatedExtendedCard": (-32004, "This operation is not supported"),
}


def _error(rpc_id: Any, code: int, message: str, data: Any = None, status: int = 200) -> JSONResponse:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return JSONResponse({"jsonrpc": "2.0", "id": rpc_id, "error": error}, status_code=status)


def _rpc_error(exc: AgentKBError) -> RPCError:
    """A service's refusal as a JSON-RPC error: an unknown task -32001, a server's failure -32603, any other
    refusal (no such agent, a bad message, a key's scope) -32602 with the HTTP problem as its data."""
    problem = {"status": exc.status, "title": exc.title, "detail": exc.detail}
    if isinstance(exc, NotFound) and exc.title == "Task not found":
        return RPCError(-32001, "Task not found", problem)
    if exc.status >= 500:
        return RPCError(-32603, exc.detail, problem)
    return RPCError(-32602, exc.detail, problem)


# --- streams -------------------------------------------------------------------------------------------------
class TaskEvents(Encoder[Event]):
    """A task's run as JSON-RPC results: `working` once it starts, the answer's artifact and the final status."""

    def __init__(self, rpc_id: Any, task: A2ATask, first: Iterable[dict[str, Any]]) -> None:
        self.rpc_id, self.task = rpc_id, task
        self.first = list(first)

    def _send(self, result: dict[str, Any]) -> str:
        return data({"jsonrpc": "2.0", "id": self.rpc_id, "result": result})

    def item(self, item: Event) -> list[str]:
        sent = [self._send(r) for r in self.first]
        self.first = []
        if isinstance(item, Start):
            sent.append(self._send(status_update(self.task, final=False)))
        elif isinstance(item, Output):
            sent += [self._send(artifact_update(self.task)), self._send(status_update(self.task, True))]
        elif isinstance(item, Error):
            sent.append(self._send(status_update(self.task, final=True)))
        return sent

    def ends(self, item: Event) -> bool:
        return isinstance(item, Output | Error)

    async def stopped(self) -> list[str]:
        self.task.error = RUN_STOPPED
        self.task.moved("failed")
        return [self._send(status_update(self.task, final=True))]

    def failed(self, exc: Exception) -> list[str]:
        error = {"code": -32603, "message": f"Internal error: {exc}"}
        return [data({"jsonrpc": "2.0", "id": self.rpc_id, "error": error})]


# --- the routes ----------------------------------------------------------------------------------------------
def agent_card(request: Request) -> dict[str, Any]:
    return {
        "name": "agentkb",
        "description": (
            "agentkb's agents over A2A (MindsDB's A2A API): name the agent in the message's metadata, "
            "`agentName` (or `agent_name`): `<agent>` in the default project, or `<project>.<agent>`."
        ),
        "url": f"{str(request.base_url).rstrip('/')}/a2a/",
        "version": __version__,
        "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC",
        "capabilities": {"streaming": True, "pushNotifications": False, "stateTransitionHistory": False},
        "defaultInputModes": MODES,
        "defaultOutputModes": MODES,
        "skills": [
            {
                "id": "agentkb_agent",
                "name": "Ask an agent",
                "description": "An agentkb agent answers from its knowledge bases and tables, citing sources.",
                "tags": ["agents", "knowledge bases", "rag", "sql"],
                "examples": ["What does the refund policy say about late returns?"],
                "inputModes": MODES,
                "outputModes": MODES,
            }
        ],
    }


@router.get("/.well-known/agent.json", summary="The A2A agent card", response_model=AgentCard)
async def get_agent_card(request: Request) -> Any:
    return agent_card(request)


@router.get(
    "/.well-known/agent-card.json", summary="The A2A agent card (A2A 0.3's path)", response_model=AgentCard
)
async def get_agent_card_v3(request: Request) -> Any:
    return agent_card(request)


@router.get("/status", summary="The A2A endpoint's status", response_model=A2AStatus)
async def a2a_status() -> Any:
    uptime = round(time.monotonic() - STARTED, 2)
    return {"status": "ok", "service": "agentkb-a2a", "uptime_seconds": uptime, "version": __version__}


async def _dispatch(services: ServicesDep, rpc_id: Any, method: str, params: Any) -> Response:
    a2a = services.a2a
    if method in ("message/send", "tasks/send"):
        return JSONResponse(
            {"jsonrpc": "2.0", "id": rpc_id, "result": task_record(await a2a.run(send_request(params)))}
        )
    if method in ("message/stream", "tasks/sendSubscribe"):
        task, events = await a2a.start(send_request(params))
        first = [task_record(task)] if method == "message/stream" else []
        return sse_stream(relay(events, services.shutdown.stopping, TaskEvents(rpc_id, task, first)))
    if method in ("tasks/get", "tasks/cancel"):
        task_id = params.get("id") if isinstance(params, dict) else None
        task = a2a.get(task_id)
        if method == "tasks/cancel":
            raise RPCError(-32002, "Task cannot be canceled", {"state": task.state})
        length = params.get("historyLength")
        return JSONResponse(
            {
                "jsonrpc": "2.0",
                "id": rpc_id,
                "result": task_record(task, length if isinstance(length, int) else None),
            }
        )
    if method in UNSUPPORTED:
        raise RPCError(*UNSUPPORTED[method])
    raise RPCError(-32601, "Method not found", {"method": method})


_RPC_ANSWER = {"application/json": {"schema": schema_ref(JSONRPCResponse)}}


@router.post(
    "/",
    summary="A2A JSON-RPC 2.0: message/send, message/stream, tasks/send, tasks/get, …",
    responses={
        200: {
            "description": "The JSON-RPC answer, or (message/stream, tasks/sendSubscribe) one per event",
            "content": {
                **_RPC_ANSWER,
                **event_stream(JSONRPCResponse, "")["content"],
            },
        },
        400: {"description": "Not JSON (-32700), or not a JSON-RPC request (-32600)", "content": _RPC_ANSWER},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": schema_ref(JSONRPCRequest)}},
        }
    },
)
async def a2a_rpc(request: Request, services: ServicesDep) -> Response:
    """One JSON-RPC request: a JSON answer, or (`message/stream`, `tasks/sendSubscribe`) server-sent events.
    An unreadable body is 400 with -32700, a body that is no JSON-RPC request 400 with -32600 (MindsDB's)."""
    try:
        body = json.loads(await request.body())
    except ValueError:
        return _error(None, -32700, "Invalid JSON payload", status=400)
    rpc_id = body.get("id") if isinstance(body, dict) else None
    if isinstance(rpc_id, bool) or not isinstance(rpc_id, str | int | None):  # JSON-RPC: string, number, null
        return _error(None, -32600, "Request payload validation error", status=400)
    if (
        not isinstance(body, dict)
        or body.get("jsonrpc") != "2.0"
        or not isinstance(body.get("method"), str)
        or not isinstance(body.get("params", {}), dict | None)
    ):
        return _error(rpc_id, -32600, "Request payload validation error", status=400)
    try:
        return await _dispatch(services, rpc_id, body["method"], body.get("params"))
    except AgentKBError as exc:
        failure = _rpc_error(exc)
        return _error(rpc_id, failure.code, failure.message, failure.data)
    except RPCError as exc:
        return _error(rpc_id, exc.code, exc.message, exc.data)


router.add_api_route("", a2a_rpc, methods=["POST"], include_in_schema=False)
