"""The one scripted OpenAI-compatible server of the tests and the benchmarks (`bench/` imports it as
`tests.openai_stub`): `/v1/chat/completions` (plain and streamed), `/v1/embeddings` and `/v1/models`.

`OpenAIStub()` runs a bare ASGI app under uvicorn in a daemon thread on 127.0.0.1 (a free port); use it as
a context manager. `base_url` (the same as `url`) ends in `/v1`; `chat_model()` and `embedding_model()`
are the `model` of an agent and the `embedding_model` of a knowledge base that use it.

Chat completions: each request takes the next reply queued with `script(...)` — `text(...)`,
`tool_call(...)`, `error(...)` or any raw `Scripted` response, each after its own `delay` — and, once the
queue is empty, `chat_script(body)` if one was given (a `Reply`, or a raw `Scripted` response), else the fixed
`chat_answer`. A request that says
`"stream": true` gets Chat Completions chunks: the text word by word, each tool call as its name then its
arguments, the finish reason, then a usage chunk. Tool call ids are `call_<i>_<name>`.

Embeddings: the next response queued with `script_embeddings(...)` if any, else vectors: `embed(texts)`
when an embedder is given, else `stub_vector(text, dim)` (deterministic, text-hash-seeded, not normalised;
`dim` is the request's `dimensions` or the stub's). They are sent in reverse order — their `index` puts
them back — unless `in_order=True`; as base64 float32 when the request says `"encoding_format": "base64"`.

Timing: `delay_s` before every answer; `hold()` makes every request wait (after it is recorded) until
`release()`, so that work behind the stub cannot finish before a test has acted. A streamed `text(...)`
may write its words `word_delay` seconds apart, and stop after `halt_after` words until `resume` is set
(a test reads what arrived while the model is still "writing").

Every request is recorded in `requests` (path, lower-cased headers, JSON body, query string) unless `record=False` (the
benchmarks, which send millions of texts); the counters `embedding_requests`, `texts`, `embed_s`,
`chat_requests` and `chat_tool_calls` are kept either way.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import numpy as np
import orjson

from tests.uvicorn_thread import UvicornThread

DEFAULT_DIM = 8
CHAT_ANSWER = "This is the benchmark stub's fixed answer."
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
_ERROR_CODES = {401: "invalid_api_key", 403: "forbidden", 404: "model_not_found", 429: "rate_limit_exceeded"}
_WORD_START = re.compile(r"(?<=\s)(?=\S)")


def stub_vector(text: str, dim: int = DEFAULT_DIM) -> list[float]:
    """The deterministic (text-hash-seeded, not normalised) vector the stub returns for `text`."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    return [float(x) for x in np.random.default_rng(seed).normal(size=dim) * 3.0]


@dataclass(frozen=True)
class Reply:
    """One chat answer: text and/or tool calls as (tool name, arguments) pairs, sent after `delay` seconds."""

    content: str | None = None
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    delay: float = 0.0
    word_delay: float = 0.0  # streamed: seconds between the words (a model writing at that pace)
    halt_after: int | None = None  # streamed: after this many words, wait for `OpenAIStub.resume`


@dataclass(frozen=True)
class Scripted:
    """A canned HTTP response for any route: status, JSON body and extra headers, after `delay` seconds."""

    status: int
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0


def text(
    content: str, *, delay: float = 0.0, word_delay: float = 0.0, halt_after: int | None = None
) -> Reply:
    return Reply(content=content, delay=delay, word_delay=word_delay, halt_after=halt_after)


def tool_call(name: str, tool_input: str, *, thought: str | None = None, delay: float = 0.0) -> Reply:
    """A call of an agentkb tool, whose one argument is `tool_input`; `thought` is the text beside it."""
    return Reply(content=thought, tool_calls=((name, {"tool_input": tool_input}),), delay=delay)


def error(status: int, message: str, *, delay: float = 0.0) -> Scripted:
    """An OpenAI-style error response."""
    code = _ERROR_CODES.get(status, "server_error")
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
    return Scripted(status, body, delay=delay)


ChatScript = Callable[[dict[str, Any]], Reply | Scripted]
EmbedFn = Callable[[list[str]], Any]  # texts -> one vector per text (an array, or lists of floats)


@dataclass
class Recorded:
    """One request the stub received."""

    path: str
    headers: dict[str, str]
    body: Any
    at: float = field(default_factory=time.monotonic)
    query: str = ""  # the query string (Azure OpenAI's `api-version=…`)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []


def _tool_calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{i}_{name}",
            "type": "function",
            "function": {"name": name, "arguments": orjson.dumps(arguments).decode()},
        }
        for i, (name, arguments) in enumerate(reply.tool_calls)
    ]


def _completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    calls = _tool_calls(reply)
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": USAGE,
    }


def _chunks(reply: Reply, model: str) -> list[dict[str, Any]]:
    base = {
        "id": "chatcmpl-stub",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": word} for word in _WORD_START.split(reply.content or "") if word]
    calls = _tool_calls(reply)
    for i, call in enumerate(calls):
        deltas.append(
            {"tool_calls": [{"index": i, **call, "function": {**call["function"], "arguments": ""}}]}
        )
        deltas.append(
            {"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]}
        )
    return [
        *({**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas),
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if calls else "stop"}]},
        {**base, "choices": [], "usage": USAGE},
    ]


def _bad_request(message: str) -> Scripted:
    return Scripted(400, {"error": {"message": message, "type": "invalid_request"}})


class OpenAIStub:
    """The server (see the module's docstring). Use as a context manager, or `start()` / `stop()`."""

    def __init__(
        self,
        embed: EmbedFn | None = None,
        *,
        dim: int = DEFAULT_DIM,
        in_order: bool = False,
        delay_s: float = 0.0,
        chat_answer: str = CHAT_ANSWER,
        chat_script: ChatScript | None = None,
        model: str = "stub",
        record: bool = True,
        bind: str = "127.0.0.1",
        public_host: str | None = None,
    ) -> None:
        self.embed = embed
        self.dim = dim
        self.in_order = in_order
        self.delay_s = delay_s
        self.chat_answer = chat_answer
        self.resume = threading.Event()  # streamed replies with `halt_after` go on once it is set
        self.content_sent: list[float] = []  # time.perf_counter() as each streamed content chunk was sent
        self.chat_script = chat_script
        self.model = model
        self.record = record
        self.bind = bind  # the interface to listen on; `public_host` is the host name clients are given
        self.public_host = public_host or (bind if bind not in ("0.0.0.0", "::") else socket.gethostname())
        self.requests: list[Recorded] = []
        self.embedding_requests = 0
        self.texts = 0
        self.embed_s = 0.0
        self.chat_requests = 0
        self.chat_tool_calls = 0
        self.url = ""
        self._chat_queue: deque[Reply | Scripted] = deque()
        self._embedding_queue: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self._open = threading.Event()
        self._open.set()
        self._uvicorn: UvicornThread | None = None

    @property
    def base_url(self) -> str:
        return self.url

    # --- scripting ---------------------------------------------------------------------------------
    def script(self, *replies: Reply | Scripted) -> None:
        """Replace the queue of chat replies, and forget the requests recorded so far."""
        with self._lock:
            self._chat_queue = deque(replies)
            self.requests.clear()

    def script_embeddings(self, *responses: Scripted) -> None:
        """Replace the queue of embedding responses, and forget the requests recorded so far."""
        with self._lock:
            self._embedding_queue = deque(responses)
            self.requests.clear()

    def reset(self) -> None:
        """Empty both queues, forget the recorded requests, release a hold."""
        with self._lock:
            self._chat_queue.clear()
            self._embedding_queue.clear()
            self.requests.clear()
        self.release()

    def hold(self) -> None:
        """From now on every request waits, once recorded, until `release()`."""
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def chat_model(self, model_name: str | None = None) -> dict[str, Any]:
        """An agent's `model` that chats with this stub."""
        return {
            "provider": "openai",
            "model_name": model_name or self.model,
            "base_url": self.url,
            "api_key": "x",
        }

    def embedding_model(self, dimensions: int | None = None, model_name: str | None = None) -> dict[str, Any]:
        """The `embedding_model` of a knowledge base that embeds with this stub."""
        return {
            "provider": "openai",
            "model_name": model_name or self.model,
            "base_url": self.url,
            "dimensions": dimensions or self.dim,
            "api_key": "x",
        }

    # --- the ASGI app ------------------------------------------------------------------------------
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        path = scope["path"].rstrip("/")
        try:
            body = orjson.loads(b"".join(chunks)) if scope["method"] == "POST" else None
        except orjson.JSONDecodeError:
            body = None
        if self.record:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            with self._lock:
                query = scope["query_string"].decode("latin-1")
                self.requests.append(Recorded(path, headers, body, query=query))
        while not self._open.is_set():
            await asyncio.sleep(0.01)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if path.endswith("/embeddings"):
            await self._embeddings(send, body)
        elif path.endswith("/chat/completions"):
            await self._chat(send, body)
        elif path.endswith("/models"):
            await self._json(
                send, Scripted(200, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
            )
        else:
            await self._json(
                send, Scripted(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
            )

    @staticmethod
    async def _json(send: Any, response: Scripted) -> None:
        if response.delay:
            await asyncio.sleep(response.delay)
        data = orjson.dumps(response.body, option=orjson.OPT_SERIALIZE_NUMPY)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(data)).encode()),
            *((k.encode(), v.encode()) for k, v in response.headers.items()),
        ]
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    async def _embeddings(self, send: Any, body: Any) -> None:
        with self._lock:
            scripted = self._embedding_queue.popleft() if self._embedding_queue else None
        if scripted is not None:
            await self._json(send, scripted)
            return
        given = body.get("input") if isinstance(body, dict) else None
        texts = [given] if isinstance(given, str) else given
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            await self._json(send, _bad_request("'input' must be a string or a list of strings"))
            return
        started = time.perf_counter()
        if self.embed is not None:
            vectors: Sequence[Any] = self.embed(texts) if texts else []
        else:
            dim = int(body.get("dimensions") or self.dim)
            vectors = [stub_vector(t, dim) for t in texts]
        self.embed_s += time.perf_counter() - started
        self.embedding_requests += 1
        self.texts += len(texts)
        if body.get("encoding_format") == "base64":  # OpenAI's: little-endian float32, base64
            vectors = [base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode() for v in vectors]
        data = [{"object": "embedding", "index": i, "embedding": vectors[i]} for i in range(len(texts))]
        tokens = sum(len(t) // 4 for t in texts)
        await self._json(
            send,
            Scripted(
                200,
                {
                    "object": "list",
                    "data": data if self.in_order else data[::-1],
                    "model": body.get("model", self.model),
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                },
            ),
        )

    async def _chat(self, send: Any, body: Any) -> None:
        self.chat_requests += 1
        if not isinstance(body, dict):
            await self._json(send, _bad_request("the body must be a JSON object"))
            return
        with self._lock:
            queued = self._chat_queue.popleft() if self._chat_queue else None
        if isinstance(queued, Scripted):
            await self._json(send, queued)
            return
        reply = queued or (
            self.chat_script(body) if self.chat_script is not None else Reply(self.chat_answer)
        )
        if isinstance(reply, Scripted):  # a raw answer from `chat_script` (log-probabilities, say)
            await self._json(send, reply)
            return
        self.chat_tool_calls += len(reply.tool_calls)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        model = str(body.get("model") or self.model)
        if not body.get("stream"):
            await self._json(send, Scripted(200, _completion(reply, model)))
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
            }
        )
        words = 0
        for chunk in _chunks(reply, model):
            content = chunk["choices"][0]["delta"].get("content") if chunk["choices"] else None
            if content:
                if reply.halt_after is not None and words == reply.halt_after:
                    while not self.resume.is_set():  # the test reads what came so far, then resumes
                        await asyncio.sleep(0.01)
                if words and reply.word_delay:
                    await asyncio.sleep(reply.word_delay)
                words += 1
                self.content_sent.append(time.perf_counter())
            await send(
                {
                    "type": "http.response.body",
                    "body": b"data: " + orjson.dumps(chunk) + b"\n\n",
                    "more_body": True,
                }
            )
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})

    # --- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> Self:
        self._uvicorn = UvicornThread(self, host=self.bind, name="openai-stub", lifespan="off")
        self.url = f"http://{self.public_host}:{self._uvicorn.start(timeout=30)}/v1"
        return self

    def stop(self) -> None:
        self.release()  # held requests answer, so that the server can shut down
        if self._uvicorn is not None:
            self._uvicorn.stop(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
