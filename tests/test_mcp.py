"""The MCP server, driven by the official `mcp` client library: over streamable HTTP at `/mcp` of the served
app (each tool called, each resource read), behind authentication when it is on, and over stdio
(`agentkb mcp`, a subprocess on the same database)."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.conftest import ServedApp
from tests.test_auth import _database, _drop, auth_settings, bearer, cli_env, create_key, login

P = "/api/projects/mindsdb"
ROWS = [
    {"id": 1, "content": "The cheetah is the fastest land animal, reaching 110 km/h.", "zone": "savanna"},
    {
        "id": 2,
        "content": "Emperor penguins huddle together to survive the Antarctic winter.",
        "zone": "polar",
    },
    {"id": 3, "content": "Polar bears hunt seals from the sea ice.", "zone": "polar"},
]
TOOLS = {
    "list_knowledge_bases",
    "search_knowledge_base",
    "list_databases",
    "query",
    "list_agents",
    "ask_agent",
}


@pytest.fixture(scope="module")
def world(base_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A knowledge base (with a metadata column), a SQLite data source and an extractive agent over the KB."""
    tag = uuid.uuid4().hex[:8]
    kb, db, agent = f"mcp_kb_{tag}", f"mcp_db_{tag}", f"mcp_agent_{tag}"
    lite = tmp_path_factory.mktemp("mcp") / "zoo.db"
    with sqlite3.connect(lite) as conn:
        conn.execute("CREATE TABLE animals (name TEXT, speed_kmh INTEGER)")
        conn.executemany(
            "INSERT INTO animals VALUES (?, ?)", [("cheetah", 110), ("penguin", 8), ("bear", 40)]
        )
    with httpx.Client(base_url=base_url, timeout=120) as c:
        r = c.post(
            f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb, "metadata_columns": ["zone"]}}
        )
        assert r.status_code == 201, r.text
        r = c.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": ROWS}})
        assert r.status_code == 200, r.text
        body = {"database": {"name": db, "engine": "sqlite", "parameters": {"db_file": str(lite)}}}
        assert c.post("/api/databases", json=body).status_code == 201
        r = c.post(
            f"{P}/agents", json={"agent": {"name": agent, "data": {"knowledge_bases": [f"mindsdb.{kb}"]}}}
        )
        assert r.status_code == 201, r.text
    return {"kb": kb, "db": db, "agent": agent}


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data: dict[str, Any] = result.structured_content
    assert json.loads(result.content[0].text) == data  # the text block says the same, for older clients
    return data


def error_text(result: Any) -> str:
    assert result.is_error
    return str(result.content[0].text)


def http_client(url: str, headers: dict[str, str] | None = None) -> Client:
    return Client(
        streamable_http_client(f"{url}/mcp", http_client=httpx2.AsyncClient(headers=headers, timeout=120))
    )


async def test_every_tool_and_resource_over_streamable_http(base_url: str, world: dict[str, str]) -> None:
    kb, db, agent = world["kb"], world["db"], world["agent"]
    async with http_client(base_url) as client:
        assert client.server_info is not None and client.server_info.name == "agentkb"
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        assert set(tools["search_knowledge_base"].input_schema["properties"]) >= {
            "knowledge_base",
            "query",
            "filters",
            "limit",
        }

        listed = structured(await client.call_tool("list_knowledge_bases", {}))["knowledge_bases"]
        mine = next(k for k in listed if k["name"] == kb)
        assert mine == {
            "name": kb,
            "project": "mindsdb",
            "metadata_columns": ["zone"],
            "content_columns": None,  # as created: the defaults apply
            "id_column": None,
            "uri": f"schema://knowledge_bases/mindsdb/{kb}",
        }
        only = structured(await client.call_tool("list_knowledge_bases", {"project": "mindsdb"}))[
            "knowledge_bases"
        ]
        assert kb in {k["name"] for k in only}
        assert "not exist" in error_text(
            await client.call_tool("list_knowledge_bases", {"project": "nope_x"})
        )

        # search: the HTTP search endpoint's results, filters and limit applied
        found = structured(
            await client.call_tool(
                "search_knowledge_base", {"knowledge_base": kb, "query": "fastest animal on land"}
            )
        )
        assert found["knowledge_base"] == f"mindsdb.{kb}"
        top = found["chunks"][0]
        assert "cheetah" in top["chunk_content"] and top["metadata"]["zone"] == "savanna"
        assert set(top) == {"id", "chunk_id", "chunk_content", "metadata", "distance", "relevance"}
        assert 0 < top["relevance"] <= 1
        polar = structured(
            await client.call_tool(
                "search_knowledge_base",
                {
                    "knowledge_base": f"mindsdb.{kb}",
                    "query": "fastest animal",
                    "filters": {"zone": "polar"},
                    "limit": 1,
                },
            )
        )["chunks"]
        assert len(polar) == 1 and polar[0]["metadata"]["zone"] == "polar"
        listed_ops = structured(
            await client.call_tool(
                "search_knowledge_base",
                {"knowledge_base": kb, "filters": [{"key": "zone", "op": "!=", "value": "polar"}]},
            )
        )["chunks"]
        assert [c["metadata"]["zone"] for c in listed_ops] == ["savanna"]
        assert "does not exist" in error_text(
            await client.call_tool("search_knowledge_base", {"knowledge_base": "no_such_kb", "query": "x"})
        )
        assert "filter operator" in error_text(
            await client.call_tool(
                "search_knowledge_base", {"knowledge_base": kb, "filters": [{"key": "zone", "op": "~~"}]}
            )
        )

        # read-only SQL through the agents' fence
        assert db in structured(await client.call_tool("list_databases", {}))["databases"]
        rows = structured(
            await client.call_tool(
                "query", {"query": f"SELECT name, speed_kmh FROM {db}.animals ORDER BY speed_kmh DESC"}
            )
        )
        assert rows["type"] == "table" and rows["column_names"] == ["name", "speed_kmh"]
        assert rows["data"] == [["cheetah", 110], ["bear", 40], ["penguin", 8]] and rows["truncated"] is False
        assert rows["tables"] == [f"{db}.animals"]
        capped = structured(
            await client.call_tool("query", {"query": f"SELECT name FROM {db}.animals", "limit": 2})
        )
        assert len(capped["data"]) == 2 and capped["truncated"] is True
        assert "Query not allowed" in error_text(
            await client.call_tool("query", {"query": f"DELETE FROM {db}.animals"})
        )
        assert "Query not allowed" in error_text(
            await client.call_tool("query", {"query": f"SELECT 1; DROP TABLE {db}.animals"})
        )
        assert "not found" in error_text(
            await client.call_tool("query", {"query": f"SELECT * FROM {db}.missing_table"})
        )

        # agents: listed with the id ask_agent takes, and run for real
        agents = structured(await client.call_tool("list_agents", {}))["agents"]
        assert {
            "agent": agent,
            "name": agent,
            "project": "mindsdb",
            "knowledge_bases": [f"mindsdb.{kb}"],
        }.items() <= next(a for a in agents if a["name"] == agent).items()
        answer = structured(
            await client.call_tool(
                "ask_agent", {"agent": agent, "question": "Which animal is the fastest on land?"}
            )
        )
        assert answer["answer"].startswith("Based on the knowledge base:") and "cheetah" in answer["answer"]
        assert [s["tool"] for s in answer["steps"]] == ["kb_list_tool", "kb_query_tool"]
        assert answer["sources"][0]["name"] == f"mindsdb.{kb}" and len(answer["trace_id"]) == 32
        assert "does not exist" in error_text(
            await client.call_tool("ask_agent", {"agent": "no_agent_here", "question": "hi"})
        )

        # resources: the list, and one knowledge base's description (secrets masked, counts)
        assert "schema://knowledge_bases" in {str(r.uri) for r in (await client.list_resources()).resources}
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert "schema://knowledge_bases/{project}/{name}" in templates
        everything = json.loads((await client.read_resource("schema://knowledge_bases")).contents[0].text)
        assert mine in everything
        described = json.loads(
            (await client.read_resource(f"schema://knowledge_bases/mindsdb/{kb}")).contents[0].text
        )
        assert described["name"] == kb and described["document_count"] == 3 and described["chunk_count"] == 3
        assert described["embedding_model"]["provider"] == "local" and described["metadata_columns"] == [
            "zone"
        ]
        with pytest.raises(MCPError, match="does not exist"):
            await client.read_resource("schema://knowledge_bases/mindsdb/no_such_kb")

    # a server without authentication refuses another Host (DNS rebinding), as for every other path
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    rebound = httpx.post(
        f"{base_url}/mcp", json=hello, headers={**accept, "Host": "evil.example:80"}, timeout=30
    )
    assert rebound.status_code == 400 and rebound.json()["title"] == "Invalid host header"
    plain = httpx.post(f"{base_url}/mcp", json=hello, headers=accept, timeout=30)
    assert plain.status_code == 200 and {t["name"] for t in plain.json()["result"]["tools"]} == TOOLS


@pytest.fixture(scope="module")
def secured(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServedApp, str]]:
    """A served agentkb with auth on (a database of its own) and an API key for it."""
    url = _database(pg_url, f"mcp_auth_{uuid.uuid4().hex[:8]}")
    data_dir = tmp_path_factory.mktemp("mcp-auth")
    try:
        key = create_key("mcp-client", url, data_dir)
        with ServedApp(auth_settings(url, data_dir)) as app:
            yield app, key
    finally:
        _drop(pg_url, url)


async def test_mcp_needs_a_credential_when_auth_is_on(secured: tuple[ServedApp, str]) -> None:
    app, key = secured
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    with httpx.Client(base_url=app.url, timeout=60) as c:
        refused = c.post("/mcp", json=hello, headers={"Accept": "application/json, text/event-stream"})
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
        wrong = c.post("/mcp", json=hello, headers={"Authorization": "Bearer akb_" + "x" * 43})
        assert wrong.status_code == 401
    with pytest.raises(Exception):  # noqa: B017,PT011 - the client's own error for a 401, whatever its class
        async with http_client(app.url) as client:
            await client.list_tools()
    for headers in ({"Authorization": f"Bearer {key}"}, {"X-Api-Key": key}):
        async with http_client(app.url, headers) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            assert structured(await client.call_tool("list_agents", {}))["agents"] == []


def sse_transport(url: str, headers: dict[str, str] | None = None) -> Client:
    return Client(sse_client(f"{url}/mcp/sse", headers=headers, timeout=30, sse_read_timeout=120))


async def test_mindsdbs_paths_sse_and_streamable(base_url: str, world: dict[str, str]) -> None:
    """MindsDB's client configs name `/mcp/sse` (the SSE transport) and `/mcp/streamable`: the same tools."""
    kb = world["kb"]
    streamable = Client(
        streamable_http_client(f"{base_url}/mcp/streamable", http_client=httpx2.AsyncClient(timeout=120))
    )
    for transport in (sse_transport(base_url), streamable):
        async with transport as client:
            assert client.server_info is not None and client.server_info.name == "agentkb"
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            found = structured(
                await client.call_tool("search_knowledge_base", {"knowledge_base": kb, "query": "sea ice"})
            )
            assert "Polar bears" in found["chunks"][0]["chunk_content"]
            answer = structured(
                await client.call_tool("ask_agent", {"agent": world["agent"], "question": "Who hunts seals?"})
            )
            assert "Polar bears" in answer["answer"]
            described = json.loads(
                (await client.read_resource(f"schema://knowledge_bases/mindsdb/{kb}")).contents[0].text
            )
            assert described["document_count"] == 3
    with httpx.Client(base_url=base_url, timeout=30) as c:
        assert c.post("/mcp/messages/", json={}).status_code == 400  # no session_id
        unknown = c.post(f"/mcp/messages/?session_id={uuid.uuid4().hex}", json={})
        assert unknown.status_code == 404
        assert c.post("/mcp/sse", json={}).status_code == 405


def _sse_endpoint(app_url: str, headers: dict[str, str]) -> tuple[httpx.Client, Any, Any, str]:
    """An open SSE stream at `/mcp/sse`: the client, the response and its lines (both kept open: closing the
    lines closes the stream), and the path its `endpoint` event names."""
    c = httpx.Client(base_url=app_url, timeout=30, headers=headers)
    response = c.send(c.build_request("GET", "/mcp/sse"), stream=True)
    assert response.status_code == 200, response.read()
    lines = response.iter_lines()
    for line in lines:
        if line.startswith("data: "):
            return c, response, lines, line.removeprefix("data: ")
    raise AssertionError("no endpoint event")


async def test_sse_needs_a_credential_and_keeps_its_own(secured: tuple[ServedApp, str]) -> None:
    app, key = secured
    refused = httpx.get(f"{app.url}/mcp/sse", timeout=30)
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
    assert httpx.post(f"{app.url}/mcp/messages/?session_id=x", json={}, timeout=30).status_code == 401
    assert httpx.post(f"{app.url}/mcp/streamable", json={}, timeout=30).status_code == 401
    async with sse_transport(app.url, {"X-Api-Key": key}) as client:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS

    # a session answers only the credential that opened it: another one's messages find no session
    token = login(app.url).json()["token"]
    c, stream, _lines, endpoint = _sse_endpoint(app.url, {"X-Api-Key": key})
    try:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        assert c.post(endpoint, json=hello, headers=bearer(token)).status_code == 404
        assert c.post(endpoint, json=hello).status_code == 202  # the key that opened it
    finally:
        stream.close()
        c.close()


async def test_agentkb_mcp_over_stdio(settings: Any, world: dict[str, str], tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKB_")}
    env |= cli_env(settings.database_url, tmp_path)
    env["AGENTKB_SECRET_KEY"] = os.environ["AGENTKB_SECRET_KEY"]  # the served app's, to read its secrets
    env["AGENTKB_DATA_SOURCE_FILE_DIR"] = str(
        settings.data_source_file_dir
    )  # where the world's SQLite file is
    params = StdioServerParameters(command=sys.executable, args=["-m", "agentkb", "mcp"], env=env)
    async with Client(params, read_timeout_seconds=120) as client:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        listed = structured(await client.call_tool("list_knowledge_bases", {}))["knowledge_bases"]
        assert world["kb"] in {k["name"] for k in listed}
        found = structured(
            await client.call_tool(
                "search_knowledge_base", {"knowledge_base": world["kb"], "query": "penguins in winter"}
            )
        )
        assert "penguins" in found["chunks"][0]["chunk_content"]
        rows = structured(
            await client.call_tool("query", {"query": f"SELECT count(*) AS n FROM {world['db']}.animals"})
        )
        assert rows["data"] == [[3]]
