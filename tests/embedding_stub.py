"""A scripted OpenAI-compatible `/v1/embeddings` server on 127.0.0.1, for tests."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import numpy as np

DEFAULT_DIM = 8


def stub_vector(text: str, dim: int = DEFAULT_DIM) -> list[float]:
    """The deterministic (text-hash-seeded, not normalised) vector the stub returns for `text`."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    return [float(x) for x in np.random.default_rng(seed).normal(size=dim) * 3.0]


@dataclass
class Recorded:
    """One request the stub received."""

    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Scripted:
    """A canned response, served once before the default behaviour resumes."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


class EmbeddingStub:
    """The server: `url` is its `/v1` base; `script(...)` queues canned responses; `requests` records."""

    def __init__(self, dim: int = DEFAULT_DIM, delay_s: float = 0.0) -> None:
        self.dim = dim
        self.delay_s = delay_s  # wait this long before each answer (slow providers, long jobs)
        self.requests: list[Recorded] = []
        self.queue: list[Scripted] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def script(self, *responses: Scripted) -> None:
        with self.lock:
            self.queue.extend(responses)

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.queue.clear()

    def respond(self, body: Any) -> Scripted:
        with self.lock:
            scripted = self.queue.pop(0) if self.queue else None
        if scripted is not None:
            return scripted
        if not isinstance(body, dict) or not isinstance(body.get("input"), list):
            return Scripted(400, {"error": {"message": "'input' must be a list", "type": "invalid_request"}})
        dim = int(body.get("dimensions") or self.dim)
        data = [
            {"object": "embedding", "index": i, "embedding": stub_vector(t, dim)}
            for i, t in enumerate(body["input"])
        ]
        return Scripted(200, {"object": "list", "data": data[::-1], "model": body.get("model")})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with stub.lock:
                    stub.requests.append(
                        Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                if stub.delay_s:
                    time.sleep(stub.delay_s)
                reply = (
                    stub.respond(body)
                    if self.path == "/v1/embeddings"
                    else Scripted(404, {"error": "no route"})
                )
                payload = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return Handler

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
