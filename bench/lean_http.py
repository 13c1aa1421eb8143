"""A lean HTTP client for timing servers: the standard library's `http.client` over one kept-alive
connection, JSON in and out.

A benchmark's client adds its own CPU to every latency it measures, the same on either server, so that the
faster the server the more of the figure is the client's. httpx spent ~0.9 ms of CPU on each SQL KB search
of `python -m bench peer` here (a sixth of agentkb's measured latency) and `http.client` ~0.4 ms, both
timed in the benchmark's own thread; curl or a browser's fetch spend less still. The peer benchmark times
its single-client searches through both clients."""

from __future__ import annotations

import http.client
import json
import urllib.parse
from typing import Any

# a connection the server closed while idle (its keep-alive timeout): sent again once, on a new connection
_CLOSED = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class LeanClient:
    """POSTs of JSON to one server (`base`, `http://host:port`), one request at a time."""

    def __init__(self, base: str, timeout: float = 1800.0) -> None:
        url = urllib.parse.urlsplit(base)
        if url.scheme != "http" or url.hostname is None:
            raise ValueError(f"an http://host:port URL is needed, not {base!r}")
        self._conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=timeout)

    def post_json(self, path: str, payload: Any) -> tuple[int, Any]:
        """(status, the answer's JSON) of `POST path`; the request is sent again once when the kept-alive
        connection turns out closed (for idempotent requests only: a search)."""
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        for attempt in (1, 2):
            try:
                self._conn.request("POST", path, body, headers)
                response = self._conn.getresponse()
                data = response.read()
                break
            except _CLOSED:
                self._conn.close()
                if attempt == 2:
                    raise
        return response.status, json.loads(data) if data else None

    def close(self) -> None:
        self._conn.close()


def sql(client: LeanClient, query: str) -> dict[str, Any]:
    """`bench.common.sql` through `client`: the answer; raise on an HTTP error or an `error` answer."""
    status, answer = client.post_json("/api/sql/query", {"query": query, "context": {"db": "mindsdb"}})
    if status >= 400 or not isinstance(answer, dict):
        raise RuntimeError(f"SQL {query[:120]!r}: HTTP {status}: {str(answer)[:300]}")
    if answer.get("type") == "error":
        raise RuntimeError(f"SQL {query[:120]!r}: {answer.get('error_message')}")
    return answer
