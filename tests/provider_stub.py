"""A scripted server for the KB model providers that are not OpenAI-compatible, each in its own wire format:
the Gemini API (`…/models/{model}:batchEmbedContents`, `:generateContent`), Amazon Bedrock
(`/model/{id}/invoke`, `/converse`; SigV4 checked as AWS does, a 403 otherwise) and Snowflake Cortex
(`/api/v2/cortex/inference:embed`, `:complete`). `ProviderStub()` runs under uvicorn in a daemon thread on
127.0.0.1 (use it as a context manager); `url` is its root.

Every request is recorded in `requests` exactly as received (method, raw percent-encoded path, query,
lower-cased headers, body bytes). Embeddings are `stub_vector(text, dim)` (tests/openai_stub.py); a chat
request takes the next text queued with `script(...)`, else `answer`. `aws_secrets` maps an access key id to
its secret: a Bedrock request whose signature does not verify with it is refused (403, AWS's message).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Self
from urllib.parse import parse_qsl, quote

import orjson

from tests.openai_stub import DEFAULT_DIM, stub_vector
from tests.uvicorn_thread import UvicornThread

_AUTHORIZATION = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<scope>[^,]+), SignedHeaders=(?P<signed>[^,]+), "
    r"Signature=(?P<signature>[0-9a-f]{64})$"
)


@dataclass
class Seen:
    """One request as the stub received it."""

    method: str
    path: str  # raw, as sent (percent-encoding kept)
    query: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return orjson.loads(self.body) if self.body else None


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sigv4_signature(seen: Seen, secret: str) -> str:
    """The SigV4 signature AWS computes for `seen` (its Authorization header names the key, scope and signed
    headers): the canonical request from the request as received. Independent of the signer under test."""
    match = _AUTHORIZATION.match(seen.headers.get("authorization", ""))
    if match is None:
        raise ValueError(f"not a SigV4 Authorization header: {seen.headers.get('authorization')!r}")
    date, region, service, terminal = match["scope"].split("/")
    signed = match["signed"].split(";")
    query = "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
        for k, v in sorted(parse_qsl(seen.query, keep_blank_values=True))
    )
    canonical = "\n".join(
        [
            seen.method,
            quote(seen.path, safe="/~"),  # each segment encoded again (every service but S3)
            query,
            "".join(f"{name}:{' '.join(seen.headers[name].split())}\n" for name in signed),
            ";".join(signed),
            hashlib.sha256(seen.body).hexdigest(),
        ]
    )
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            seen.headers["x-amz-date"],
            match["scope"],
            hashlib.sha256(canonical.encode()).hexdigest(),
        ]
    )
    key = _hmac(f"AWS4{secret}".encode(), date)
    for part in (region, service, terminal):
        key = _hmac(key, part)
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


@dataclass
class ProviderStub:
    dim: int = DEFAULT_DIM
    answer: str = "stub answer"
    aws_secrets: dict[str, str] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)
    url: str = ""
    _replies: deque[tuple[int, Any] | str] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _uvicorn: UvicornThread | None = None

    def script(self, *replies: str | tuple[int, Any]) -> None:
        """Queue chat replies (a text, or a (status, JSON body) answer); forget the recorded requests."""
        with self._lock:
            self._replies = deque(replies)
            self.requests.clear()

    def reset(self) -> None:
        self.script()

    def _reply(self) -> tuple[int, Any] | str:
        with self._lock:
            return self._replies.popleft() if self._replies else self.answer

    # --- the ASGI app ------------------------------------------------------------------------------
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        seen = Seen(
            scope["method"],
            scope["raw_path"].decode("latin-1"),
            scope["query_string"].decode("latin-1"),
            {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]},
            b"".join(chunks),
        )
        with self._lock:
            self.requests.append(seen)
        status, body = self._route(seen)
        data = orjson.dumps(body)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    def _chat(self, shape: Any) -> tuple[int, Any]:
        reply = self._reply()
        return reply if isinstance(reply, tuple) else (200, shape(reply))

    def _route(self, seen: Seen) -> tuple[int, Any]:
        path, body = seen.path, seen.json
        if path.endswith(":batchEmbedContents"):
            dims = [r.get("outputDimensionality", self.dim) for r in body["requests"]]
            texts = [r["content"]["parts"][0]["text"] for r in body["requests"]]
            return 200, {
                "embeddings": [{"values": stub_vector(t, d)} for t, d in zip(texts, dims, strict=True)]
            }
        if path.endswith(":generateContent"):
            return self._chat(
                lambda text: {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}]}
            )
        if path.endswith(("/invoke", "/converse")):
            refused = self._aws_refusal(seen)
            if refused is not None:
                return 403, {"message": refused}
            if path.endswith("/converse"):
                return self._chat(
                    lambda text: {
                        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
                        "stopReason": "end_turn",
                    }
                )
            if "texts" in body:  # Cohere
                vectors = [stub_vector(t, self.dim) for t in body["texts"]]
                embed_v4 = body.get("embedding_types") == ["float"]
                return 200, {
                    "id": "e",
                    "embeddings": {"float": vectors} if embed_v4 else vectors,
                    "texts": body["texts"],
                }
            return 200, {"embedding": stub_vector(body["inputText"], body.get("dimensions", self.dim))}
        if path.endswith("/cortex/inference:embed"):
            vectors = [stub_vector(t, self.dim) for t in body["text"]]
            data = [{"object": "embedding", "index": i, "embedding": [v]} for i, v in enumerate(vectors)]
            return 200, {"object": "list", "data": data[::-1], "model": body["model"]}
        if path.endswith("/cortex/inference:complete"):
            return self._chat(lambda text: {"choices": [{"message": {"content": text}}]})
        return 404, {"message": f"no route {path}"}

    def _aws_refusal(self, seen: Seen) -> str | None:
        match = _AUTHORIZATION.match(seen.headers.get("authorization", ""))
        if match is None:
            return "Missing Authentication Token"
        secret = self.aws_secrets.get(match["key"])
        if secret is None:
            return "The security token included in the request is invalid."
        if not hmac.compare_digest(sigv4_signature(seen, secret), match["signature"]):
            return "The request signature we calculated does not match the signature you provided."
        return None

    # --- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> Self:
        self._uvicorn = UvicornThread(self, name="provider-stub", lifespan="off")
        self.url = f"http://127.0.0.1:{self._uvicorn.start(timeout=30)}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._uvicorn is not None:
            self._uvicorn.stop(timeout=10)
