"""The benchmarks' `http.client` client (`bench.agent.Client`, through which `bench peer` times its searches)
against a real uvicorn server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bench.agent import Client
from bench.common import sql_answer, sql_body
from bench.peer_phases import SEARCH_BLOCK, Side, client_turns, search_block
from tests.uvicorn_thread import UvicornThread


class Echo:
    """Answers `POST /api/sql/query` with a table holding the query, or a 400 for `SELECT 400`, and a GET
    (`/api/status`) with a status; keeps each request's method and connection (the client's port)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, int]] = []  # (method, the client's port) in the order they came

    @property
    def connections(self) -> set[int]:
        return {port for _, port in self.requests}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.requests.append((scope["method"], scope["client"][1]))
        if scope["method"] == "GET":  # /api/status
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b'{"status": "ok"}'})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = json.loads(body)["query"]
        status, answer = 200, {"type": "table", "column_names": ["q"], "data": [[query]]}
        if query == "SELECT 400":
            status, answer = 400, {"detail": "bad"}
        payload = json.dumps(answer).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": payload})


@pytest.fixture
def echo() -> Iterator[tuple[Echo, str]]:
    app = Echo()
    server = UvicornThread(app, lifespan="off", timeout_keep_alive=0.3)
    port = server.start()
    try:
        yield app, f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_one_kept_alive_connection_and_a_new_one_once_the_server_closed_it(echo: tuple[Echo, str]) -> None:
    app, base = echo
    client = Client(base)
    try:
        for i in range(3):
            assert client.post("/api/sql/query", {"query": f"SELECT {i}"})[1]["data"] == [[f"SELECT {i}"]]
        assert len(app.connections) == 1
        time.sleep(1.0)  # past the server's keep-alive timeout: it closed the connection
        assert client.post("/api/sql/query", {"query": "SELECT again"})[1]["data"] == [["SELECT again"]]
        assert len(app.connections) == 2
    finally:
        client.close()


def test_an_http_error_raises(echo: tuple[Echo, str]) -> None:
    _, base = echo
    client = Client(base)
    try:
        with pytest.raises(RuntimeError, match="-> 400"):
            client.post("/api/sql/query", {"query": "SELECT 400"})
        assert client.post("/api/sql/query", {"query": "SELECT 1"})[1]["data"] == [["SELECT 1"]]
    finally:
        client.close()


def test_clients_take_turns_by_two_blocks() -> None:
    turns = client_turns([f"q{i}" for i in range(10)], block=2)
    assert [c for c, _ in turns] == ["stdlib"] * 4 + ["httpx"] * 4 + ["stdlib"] * 2
    assert [q for _, q in turns] == [f"q{i}" for i in range(10)]


def test_a_short_run_still_gives_each_client_its_turn() -> None:
    assert search_block(400) == SEARCH_BLOCK == 50  # the default 200 searches through each client
    assert search_block(40) == 10
    assert search_block(1) == 1
    turns = client_turns([f"q{i}" for i in range(40)], search_block(40))
    assert [c for c, _ in turns].count("httpx") == 20


def test_sql_answers_that_are_errors_raise() -> None:
    assert sql_answer("SELECT 1", {"type": "table", "data": []}) == {"type": "table", "data": []}
    with pytest.raises(RuntimeError, match="no such table"):
        sql_answer("SELECT x", {"type": "error", "error_message": "no such table"})
    with pytest.raises(RuntimeError, match="not an answer"):
        sql_answer("SELECT x", None)
    assert sql_body("SELECT 1") == {"query": "SELECT 1", "context": {"db": "mindsdb"}}


@pytest.mark.parametrize("client", ["stdlib", "httpx"])
def test_a_block_starts_on_a_connection_made_ready_outside_the_timing(
    echo: tuple[Echo, str], client: str
) -> None:
    app, base = echo
    side = Side("agentkb", base, {})
    try:
        assert side.sql(client, "SELECT 1")["data"] == [["SELECT 1"]]
        time.sleep(1.0)  # past the server's keep-alive timeout: it closed the connection
        side.ready(client)  # reopens it
        assert side.sql(client, "SELECT 2")["data"] == [["SELECT 2"]]
        (_, first), (ready, again), (searched, then) = app.requests
        assert (ready, searched) == ("GET", "POST")
        assert again != first  # the status request paid for the new connection...
        assert then == again  # ...and the search after it used that one
    finally:
        side.close()
