"""Instant OpenAI-compatible servers for the benchmarks: `/v1/embeddings` and `/v1/chat/completions`.

`StubServer(embed)` runs a bare ASGI app under uvicorn in a daemon thread on 127.0.0.1 (free port) and
serves the vectors `embed(texts)` returns. Two embedders come with it:

- `HashedBow`: a fixed random projection of a hashed bag of words: every word (lower-cased ASCII
  `[a-z0-9]+`) maps by crc32 to one row of a fixed Gaussian table; a text's vector is the L2-normalised
  sum of its words' rows (counted with repeats). Deterministic, cheap (~10 µs for a 500-character text), and texts that share words get similar
  vectors, so vector search has structure to find. The benchmarks compute the same vectors in-process
  (`HashedBow()(texts)`) for exact brute-force ground truth.
- `CachedEmbeddings`: text → vector from a dict (e.g. real all-MiniLM-L6-v2 vectors cached on disk), with
  a fallback callable for texts it does not hold (counted in `misses`).

A knowledge base uses a stub with
`{"provider": "openai", "model_name": "stub", "base_url": stub.url, "dimensions": 384, "api_key": "x"}`.

The chat route answers `chat_answer` to every request, unless `chat_script` is given: a function of the
request body that returns the reply, a `ChatReply` (text and/or tool calls). `kb_tool_then_answer(kb)`
is one: while the conversation holds no tool result it calls `kb_query_tool` with
`SELECT * FROM <kb> WHERE content = '<last user message>' LIMIT 5`; once it does, the fixed answer. It
keeps no state between requests, so concurrent conversations do not disturb each other. Tool calls
are sent as plain JSON or, for `"stream": true`, as Chat Completions chunks (name, then arguments).
"""

from __future__ import annotations

import re
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import orjson
import scipy.sparse as sp
import uvicorn

DIM = 384
CHAT_ANSWER = "This is the benchmark stub's fixed answer."
# bytes other than ASCII letters and digits → space (on the lower-cased UTF-8 text)
_NON_WORD = bytes.maketrans(
    bytes(range(256)), bytes(c if chr(c).isascii() and chr(c).isalnum() else 32 for c in range(256))
)

EmbedFn = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class ChatReply:
    """One chat answer: `content` and/or `tool_calls` as (tool name, arguments dict) pairs."""

    content: str | None = None
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()


ChatScript = Callable[[dict[str, Any]], ChatReply]


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the request's last user message ("" if none)."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # content parts
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def kb_tool_then_answer(kb: str, answer: str = "", limit: int = 5, tool: str = "kb_query_tool") -> ChatScript:
    """A stateless script: one `tool` call `SELECT * FROM <kb> WHERE content = '<question>' LIMIT <limit>`
    (argument `tool_input`) until the conversation holds a tool result, then the fixed `answer`
    (default `CHAT_ANSWER`)."""
    final = answer or CHAT_ANSWER

    def script(body: dict[str, Any]) -> ChatReply:
        messages = body.get("messages") or []
        if any(isinstance(m, dict) and m.get("role") in ("tool", "function") for m in messages):
            return ChatReply(content=final)
        question = " ".join(last_user_text(body).split()).replace("'", "''") or "benchmark"
        sql = f"SELECT * FROM {kb} WHERE content = '{question}' LIMIT {limit}"
        return ChatReply(tool_calls=((tool, {"tool_input": sql}),))

    return script


def _normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (vectors / norms).astype(np.float32, copy=False)


class HashedBow:
    """Deterministic bag-of-words embeddings: unit vectors, similar texts → similar vectors."""

    def __init__(self, dim: int = DIM, buckets: int = 1 << 14, seed: int = 20240607) -> None:
        self.dim = dim
        self.mask = buckets - 1
        assert buckets & self.mask == 0, "buckets must be a power of two"
        self.table = np.random.default_rng(seed).standard_normal((buckets, dim), dtype=np.float32)
        self._bucket: dict[bytes, int] = {}

    def _row(self, word: bytes) -> int:
        row = self._bucket[word] = zlib.crc32(word) & self.mask
        return row

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        get = self._bucket.__getitem__
        columns: list[int] = []
        indptr = [0]
        for text in texts:
            words = text.lower().encode().translate(_NON_WORD).split()
            try:
                columns.extend(map(get, words))
            except KeyError:
                columns.extend(self._bucket.get(w) or self._row(w) for w in words)
            indptr.append(len(columns))
        counts = sp.csr_matrix(
            (np.ones(len(columns), dtype=np.float32), np.asarray(columns, dtype=np.int64), np.asarray(indptr)),
            shape=(len(texts), self.mask + 1),
        )
        out = np.asarray(counts @ self.table, dtype=np.float32)
        for i in np.flatnonzero(np.diff(indptr) == 0):  # no words: a random vector seeded by the text's crc32
            seed = zlib.crc32(texts[i].encode())
            out[i] = np.random.default_rng(seed).standard_normal(self.dim, dtype=np.float32)
        return _normalize(out)


class CachedEmbeddings:
    """Vectors from a dict text → vector; texts not in it go to `fallback` (and are added)."""

    def __init__(self, vectors: dict[str, np.ndarray], fallback: EmbedFn | None = None) -> None:
        self.vectors = vectors
        self.fallback = fallback
        self.hits = 0
        self.misses = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            if self.fallback is None:
                raise KeyError(f"{len(missing)} texts not in the embedding cache, e.g. {missing[0][:80]!r}")
            for text, vector in zip(missing, self.fallback(missing), strict=True):
                self.vectors[text] = np.asarray(vector, dtype=np.float32)
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        return np.stack([self.vectors[t] for t in texts])


class StubServer:
    """The server: `url` is its `/v1` base. `requests` / `texts` count embedding calls; `embed_s` is the
    time spent computing vectors. Use as a context manager."""

    def __init__(self, embed: EmbedFn | None = None, *, chat_answer: str = CHAT_ANSWER, model: str = "stub",
                 chat_script: ChatScript | None = None) -> None:
        self.embed: EmbedFn = embed if embed is not None else HashedBow()
        self.chat_answer = chat_answer
        self.chat_script = chat_script
        self.chat_tool_calls = 0
        self.model = model
        self.requests = 0
        self.texts = 0
        self.embed_s = 0.0
        self.chat_requests = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # --- the ASGI app -------------------------------------------------------------------------------
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
            await self._json(send, 400, {"error": {"message": "body is not JSON", "type": "invalid_request"}})
            return
        if path.endswith("/embeddings"):
            await self._embeddings(send, body)
        elif path.endswith("/chat/completions"):
            await self._chat(send, body)
        elif path.endswith("/models"):
            await self._json(send, 200, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
        else:
            await self._json(send, 404, {"error": {"message": f"no route {path}", "type": "not_found"}})

    @staticmethod
    async def _json(send: Any, status: int, payload: Any) -> None:
        data = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})

    async def _embeddings(self, send: Any, body: Any) -> None:
        given = body.get("input") if isinstance(body, dict) else None
        texts = [given] if isinstance(given, str) else given
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            await self._json(send, 400, {"error": {"message": "'input' must be a string or a list of strings",
                                                   "type": "invalid_request"}})
            return
        started = time.perf_counter()
        vectors = self.embed(texts) if texts else np.zeros((0, DIM), dtype=np.float32)
        self.embed_s += time.perf_counter() - started
        self.requests += 1
        self.texts += len(texts)
        data = [{"object": "embedding", "index": i, "embedding": vectors[i]} for i in range(len(texts))]
        tokens = sum(len(t) // 4 for t in texts)
        await self._json(send, 200, {"object": "list", "data": data, "model": body.get("model", self.model),
                                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    async def _chat(self, send: Any, body: Any) -> None:
        self.chat_requests += 1
        model = body.get("model", self.model) if isinstance(body, dict) else self.model
        created = int(time.time())
        reply = (self.chat_script(body) if self.chat_script is not None and isinstance(body, dict)
                 else ChatReply(content=self.chat_answer))
        calls = [{"id": f"call_{self.chat_requests}_{i}", "type": "function",
                  "function": {"name": name, "arguments": orjson.dumps(arguments).decode()}}
                 for i, (name, arguments) in enumerate(reply.tool_calls)]
        self.chat_tool_calls += len(calls)
        finish = "tool_calls" if calls else "stop"
        if isinstance(body, dict) and body.get("stream"):
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
            base = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": created, "model": model}
            deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
            deltas += [{"content": word} for word in re.findall(r"\S+\s*", reply.content or "")]
            for i, call in enumerate(calls):
                deltas.append({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                               "function": {"name": call["function"]["name"], "arguments": ""}}]})
                deltas.append({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]})
            events = [
                *({**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas),
                {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            ]
            payload = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"
            await send({"type": "http.response.body", "body": payload})
            return
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if calls:
            message["tool_calls"] = calls
        await self._json(send, 200, {
            "id": "chatcmpl-stub", "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        })

    def chat_model(self, model_name: str | None = None) -> dict[str, Any]:
        """An agent's `model` that chats with this stub."""
        return {"provider": "openai", "model_name": model_name or self.model, "base_url": self.url, "api_key": "x"}

    # --- lifecycle ----------------------------------------------------------------------------------
    def embedding_model(self, dimensions: int = DIM, model_name: str | None = None) -> dict[str, Any]:
        """The `embedding_model` of a knowledge base that embeds with this stub."""
        return {"provider": "openai", "model_name": model_name or self.model, "base_url": self.url,
                "dimensions": dimensions, "api_key": "x"}

    bind = "127.0.0.1"          # the interface to listen on
    public_host = "127.0.0.1"   # the host name clients are given (see bench/peer.py's HostStub)

    def start(self) -> Self:
        config = uvicorn.Config(self, host=self.bind, port=0, log_level="warning", lifespan="off",
                                access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="bench-stub", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the stub server did not start")
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://{self.public_host}:{port}/v1"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
