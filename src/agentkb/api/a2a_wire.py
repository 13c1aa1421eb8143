"""A2A's wire shapes for `api/a2a.py`: the card's and JSON-RPC's models (the OpenAPI document), a task and its
events as JSON (written once for A2A 0.3 and MindsDB's dialect: parts carry `kind` and `type`, events `kind`,
`taskId` and MindsDB's `id`), and a message request read from either dialect's params."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentkb.service.agents import A2ARequest, A2ATask

AGENT_KEYS = ("agent_name", "agentName")
PROJECT_KEYS = ("project_name", "projectName")


class AgentCard(BaseModel):
    """The server's A2A agent card (A2A 0.3, with MindsDB's card's fields)."""

    model_config = ConfigDict(extra="allow")
    name: str
    description: str
    url: str
    version: str
    protocolVersion: str
    preferredTransport: str
    capabilities: dict[str, bool]
    defaultInputModes: list[str]
    defaultOutputModes: list[str]
    skills: list[dict[str, Any]]


class A2AStatus(BaseModel):
    status: str
    service: str
    uptime_seconds: float
    version: str


class JSONRPCRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "jsonrpc": "2.0",
                    "id": "1",
                    "method": "message/send",
                    "params": {
                        "message": {
                            "kind": "message",
                            "role": "user",
                            "messageId": "m-1",
                            "parts": [{"kind": "text", "text": "How long do refunds take?"}],
                            "metadata": {"agentName": "support_agent"},
                        }
                    },
                }
            ]
        },
    )
    jsonrpc: Literal["2.0"]
    id: str | int | None = None
    method: str = Field(
        description="message/send, message/stream, tasks/send, tasks/sendSubscribe, tasks/get, …"
    )
    params: dict[str, Any] | None = None


class JSONRPCError(BaseModel):
    code: int
    message: str
    data: Any = None


class JSONRPCResponse(BaseModel):
    """A result (a task, or one stream event) or an error; errors of the call itself come with HTTP 200."""

    jsonrpc: Literal["2.0"]
    id: str | int | None
    result: dict[str, Any] | None = None
    error: JSONRPCError | None = None


class RPCError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


# --- the wire shapes --------------------------------------------------------------------------------------
def _part(text: str) -> dict[str, Any]:
    return {"kind": "text", "type": "text", "text": text}


def _message(task: A2ATask, role: str, text: str, n: int) -> dict[str, Any]:
    return {
        "kind": "message",
        "role": role,
        "parts": [_part(text)],
        "messageId": f"{task.id}-{n}",
        "taskId": task.id,
        "contextId": task.context_id,
    }


def _status(task: A2ATask) -> dict[str, Any]:
    status: dict[str, Any] = {"state": task.state, "timestamp": task.updated_at.isoformat()}
    said = task.answer if task.state == "completed" else task.error if task.state == "failed" else None
    if said is not None:
        status["message"] = _message(task, "agent", said, len(task.history))
    return status


def _artifact(task: A2ATask) -> dict[str, Any]:
    return {
        "artifactId": f"{task.id}-answer",
        "name": "answer",
        "parts": [_part(task.answer or "")],
        "index": 0,
        "append": False,
        "lastChunk": True,
        "metadata": {"trace_id": task.trace_id, "sources": task.sources},
    }


def _metadata(task: A2ATask) -> dict[str, Any]:
    return {"agent_name": task.agent, "project_name": task.project, "trace_id": task.trace_id}


def task_record(task: A2ATask, history_length: int | None = None) -> dict[str, Any]:
    history = [_message(task, role, text, i) for i, (role, text) in enumerate(task.history)]
    if history_length is not None:
        history = history[-history_length:] if history_length > 0 else []
    return {
        "kind": "task",
        "id": task.id,
        "contextId": task.context_id,
        "sessionId": task.context_id,  # MindsDB's name for the context
        "status": _status(task),
        "artifacts": [_artifact(task)] if task.answer is not None else [],
        "history": history,
        "metadata": _metadata(task),
    }


def status_update(task: A2ATask, final: bool) -> dict[str, Any]:
    return {
        "kind": "status-update",
        "id": task.id,
        "taskId": task.id,
        "contextId": task.context_id,
        "status": _status(task),
        "final": final,
        "metadata": _metadata(task),
    }


def artifact_update(task: A2ATask) -> dict[str, Any]:
    return {
        "kind": "artifact-update",
        "id": task.id,
        "taskId": task.id,
        "contextId": task.context_id,
        "artifact": _artifact(task),
    }


# --- reading a request -------------------------------------------------------------------------------------
def _text(message: dict[str, Any]) -> str:
    parts = message.get("parts")
    if not isinstance(parts, list):
        raise RPCError(-32602, "Invalid parameters: 'message.parts' must be a list")
    texts = [
        p["text"]
        for p in parts
        if isinstance(p, dict) and p.get("kind", p.get("type")) == "text" and isinstance(p.get("text"), str)
    ]
    return "\n".join(texts)


def _history(given: Any) -> tuple[tuple[str, str], ...]:
    turns = []
    for item in given if isinstance(given, list) else []:
        if isinstance(item, dict) and item.get("role") in ("user", "agent", "assistant"):
            turns.append(("user" if item["role"] == "user" else "agent", _text(item)))
    return tuple(turns)


def _named(keys: tuple[str, ...], *sources: Any) -> str | None:
    for source in sources:
        for key in keys:
            value = source.get(key) if isinstance(source, dict) else None
            if isinstance(value, str) and value:
                return value
    return None


def send_request(params: Any) -> A2ARequest:
    """A message's request, from A2A 0.3's `MessageSendParams` or MindsDB's `TaskSendParams` /
    `MessageStreamParams`."""
    if not isinstance(params, dict) or not isinstance(params.get("message"), dict):
        raise RPCError(-32602, "Invalid parameters: 'params.message' is required")
    message = params["message"]
    agent = _named(AGENT_KEYS, message.get("metadata"), params.get("metadata"))
    if agent is None:
        raise RPCError(-32600, "Agent name is required but was not provided in the request metadata")
    ids = [params.get("id"), message.get("taskId")]
    contexts = [message.get("contextId"), params.get("sessionId"), params.get("contextId")]
    return A2ARequest(
        agent=agent,
        text=_text(message),
        project=_named(PROJECT_KEYS, message.get("metadata"), params.get("metadata")),
        task_id=next((i for i in ids if isinstance(i, str) and i), None),
        context_id=next((c for c in contexts if isinstance(c, str) and c), None),
        history=_history(message.get("history") or params.get("history")),
    )
