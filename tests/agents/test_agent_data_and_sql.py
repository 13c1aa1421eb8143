"""What an agent reads and how SQL drives it, over real HTTP with a scripted OpenAI-compatible LLM: uploaded
table files as `files.<name>` tables, name patterns in `data`, `kb_info_tool`, badly quoted names (MindsDB's
tolerance), ALTER / UPDATE AGENT, per-query USING overrides, extra WHERE columns, information_schema.agents."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.openai_stub import OpenAIStub, Reply, text, tool_call

P = "/api/projects/mindsdb"


def sql(client: httpx.Client, query: str) -> dict[str, Any]:
    r = client.post("/api/sql/query", json={"query": query, "context": {"db": "mindsdb"}})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def table(client: httpx.Client, query: str) -> list[dict[str, Any]]:
    answer = sql(client, query)
    assert answer["type"] == "table", answer
    return [dict(zip(answer["column_names"], row, strict=True)) for row in answer["data"]]


def upload(client: httpx.Client, name: str, filename: str, content: str | bytes, kind: str) -> None:
    r = client.put(f"/api/files/{name}", files={"file": (filename, content, kind)})
    assert r.status_code == 200, r.text


def observations(stub: OpenAIStub) -> list[str]:
    """The tool results the LLM was sent, in order (from its last request)."""
    return [str(m["content"]) for m in stub.requests[-1].messages if m.get("role") == "tool"]


def ask(client: httpx.Client, agent: str, question: str = "go") -> dict[str, Any]:
    r = client.post(
        f"{P}/agents/{agent}/completions", json={"messages": [{"question": question, "answer": None}]}
    )
    assert r.status_code == 200, r.text
    return r.json()["message"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def files(base_url: str) -> Iterator[str]:
    u = uuid.uuid4().hex[:8]
    rows = [{"id": 1, "region": "north", "amount": 10}, {"id": 2, "region": "south", "amount": 32}]
    with httpx.Client(base_url=base_url, timeout=120) as c:
        upload(c, f"sales_{u}_a", "a.json", json.dumps(rows), "application/json")
        upload(c, f"sales_{u}_b", "b.csv", "id,region,amount\n3,east,7\n", "text/csv")
        upload(c, f"secret_{u}", "s.csv", "id,code\n1,swordfish\n", "text/csv")
        upload(c, f"sales_{u}_notes", "n.md", "# Notes\n\nNot a table.\n", "text/markdown")
        yield u
        for name in (f"sales_{u}_a", f"sales_{u}_b", f"secret_{u}", f"sales_{u}_notes"):
            c.delete(f"/api/files/{name}")


def test_uploaded_table_files_are_the_files_tables(
    client: httpx.Client, stub: OpenAIStub, files: str, unique: str
) -> None:
    u = files
    agent = f"files_agent_{unique}"
    r = client.post(
        f"{P}/agents",
        json={
            "agent": {"name": agent, "model": stub.chat_model(), "data": {"tables": [f"files.sales_{u}_*"]}}
        },
    )
    assert r.status_code == 201, r.text
    stub.script(
        tool_call("sql_db_list_tables", ""),
        tool_call("sql_db_schema", f"files.sales_{u}_a, files.secret_{u}"),
        tool_call("sql_db_query", f"SELECT region, amount FROM `files.sales_{u}_a` WHERE id = '2'"),
        tool_call("sql_db_query", f"SELECT sum(amount) AS total FROM files.sales_{u}_b"),
        tool_call("sql_db_query", f"SELECT * FROM files.secret_{u}"),
        text("done"),
    )
    assert ask(client, agent)["content"] == "done"
    listed, schema, one, total, refused = observations(stub)
    # a pattern matches table files only (the markdown document is not a table)
    assert listed == f"files.sales_{u}_a, files.sales_{u}_b"
    assert schema.startswith(f"Table named `files.sales_{u}_a`:\n\nSample with first 3 rows")
    assert "id,region,amount\r\n1,north,10\r\n2,south,32\r\n" in schema
    assert "`id` : `INTEGER`,\t\n`region` : `TEXT`,\t\n`amount` : `INTEGER`" in schema
    assert schema.endswith(
        f"Error: Tables: files.secret_{u} not found in the database\n"
        f"Available tables: files.sales_{u}_a, files.sales_{u}_b"
    )
    # one back-quoted `files.<name>` (MindsDB's tolerance); '2' finds the integer id, as MindsDB's DuckDB does
    assert (
        one
        == "Output columns: 'region', 'amount'\nResult in CSV format (dialect is 'excel'):\nregion,amount\r\nsouth,32\r\n"
    )
    assert total.endswith("total\r\n7\r\n")
    assert refused == f"Error: Table files.secret_{u} not found. Available tables: files.sales_{u}_*"


def test_kb_info_tool_patterns_and_quoting(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    kbs = [f"info_{unique}_a", f"info_{unique}_b", f"hidden_{unique}"]
    for name in kbs:
        assert client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": name}}).status_code == 201
    filled = client.put(
        f"{P}/knowledge_bases/{kbs[0]}",
        json={"knowledge_base": {"rows": [{"id": "j", "content": "Jupiter is the largest planet"}]}},
    )
    assert filled.status_code == 200, filled.text
    agent = f"kb_agent_{unique}"
    r = client.post(
        f"{P}/agents",
        json={
            "agent": {
                "name": agent,
                "model": stub.chat_model(),
                "data": {"knowledge_bases": [f"info_{unique}_*"]},
            }
        },
    )
    assert r.status_code == 201, r.text
    stub.script(
        tool_call("kb_list_tool", ""),
        tool_call("kb_info_tool", f"$START$ `{kbs[0]}` $STOP$"),
        tool_call("kb_info_tool", json.dumps([kbs[2]])),
        tool_call("kb_query_tool", f"SELECT id, chunk_content FROM `mindsdb.{kbs[0]}` WHERE id = 'j'"),
        tool_call("kb_query_tool", f"SELECT * FROM {kbs[2]} WHERE content = 'planet'"),
        text("done"),
    )
    ask(client, agent)
    listed, info, hidden, quoted, refused = observations(stub)
    assert json.loads(listed) == [f"mindsdb.{kbs[0]}", f"mindsdb.{kbs[1]}"]
    assert info.startswith(
        f"## Knowledge Base: `{kbs[0]}`\n\n### Schema Information:\n```\nOutput columns: 'NAME'"
    )
    assert "\n```\n\n### Sample Data:\n```\nOutput columns: 'id', 'chunk_id', 'chunk_content'" in info
    assert "Jupiter is the largest planet" in info and info.endswith("\n```\n")
    not_found = f"Knowledge base {kbs[2]} not found. Available knowledge bases: mindsdb.info_{unique}_*"
    assert hidden == f"Error getting information for knowledge base `{kbs[2]}`: {not_found}"
    assert quoted.endswith("id,chunk_content\r\nj,Jupiter is the largest planet\r\n")
    assert refused.startswith(f"Error executing knowledge base query: {not_found}. Please check")


def test_sql_agent_statements_and_query_options(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    agent = f"sql_agent_{unique}"
    sql_ok = sql(
        client,
        f"CREATE AGENT {agent} USING provider = 'openai', model = 'gpt-4o', openai_api_key = 'sk-flat', "
        f"base_url = '{stub.base_url}', prompt_template = 'first prompt', temperature = 0.5",
    )
    assert sql_ok["type"] == "ok", sql_ok
    assert (
        sql(client, f"ALTER AGENT {agent} USING prompt_template = 'second prompt', timeout = 30")["type"]
        == "ok"
    )
    assert sql(client, f"UPDATE AGENT {agent} SET max_iterations = 4")["type"] == "ok"

    (row,) = table(client, f"SELECT * FROM information_schema.agents WHERE name = '{agent}'")
    assert json.loads(row["MODEL"]) == {"provider": "openai", "model_name": "gpt-4o"}
    assert json.loads(row["PARAMS"]) == {
        "openai_api_key": "******",
        "base_url": stub.base_url,
        "temperature": 0.5,
        "timeout": 30,
        "max_iterations": 4,
        "prompt_template": "second prompt",
    }
    assert (row["MODEL_NAME"], row["PROVIDER"], row["PROMPT_TEMPLATE"]) == (
        "gpt-4o",
        "openai",
        "second prompt",
    )

    stub.reset()
    stub.script(text("bonjour"))
    rows = table(
        client,
        f"SELECT answer, lang, question FROM {agent} WHERE question = 'hi' AND lang = 'fr' "
        "USING model = {'model_name': 'gpt-4o-mini'}, prompt_template = 'per query prompt'",
    )
    assert rows == [{"answer": "bonjour", "lang": "fr", "question": "hi"}]
    request = stub.requests[-1]
    assert request.headers["authorization"] == "Bearer sk-flat"  # same provider and server: the agent's key
    assert request.body["model"] == "gpt-4o-mini" and request.body["temperature"] == 0.5
    assert "per query prompt" in request.messages[0]["content"]

    # another server named per query: the agent's key stays with the agent's server (a 400 asks for one)
    other = stub.base_url.replace("127.0.0.1", "localhost")
    moved = sql(
        client, f"SELECT * FROM {agent} WHERE question = 'hi' USING model = {{'base_url': '{other}'}}"
    )
    assert moved["type"] == "error" and "send 'model.api_key' again" in moved["error_message"], moved
    stub.script(text("elsewhere"))
    (star,) = table(
        client,
        f"SELECT * FROM {agent} WHERE question = 'hi' "
        f"USING model = {{'base_url': '{other}', 'api_key': 'sk-query'}}",
    )
    assert star == {"answer": "elsewhere", "question": "hi"}
    assert stub.requests[-1].headers["authorization"] == "Bearer sk-query"

    refused = sql(client, f"SELECT answer FROM {agent} WHERE question = 'hi' USING bogus = 1")
    assert refused["type"] == "error" and "USING bogus is not supported" in refused["error_message"]
    missing = sql(client, f"SELECT answer FROM {agent} WHERE lang = 'fr'")
    assert missing["type"] == "error" and "WHERE question = '...'" in missing["error_message"]
    assert sql(client, f"ALTER AGENT nope_{unique} USING timeout = 1")["type"] == "error"
    assert sql(client, f"DROP AGENT {agent}")["type"] == "ok"


def test_selected_columns_are_asked_as_rows(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    """MindsDB 26.1's select targets: columns beyond `answer` and the inputs come back as rows."""
    agent = f"rows_agent_{unique}"
    assert (
        client.post(f"{P}/agents", json={"agent": {"name": agent, "model": stub.chat_model()}}).status_code
        == 201
    )
    rows = [{"name": "Jupiter", "moons": 95}, {"name": "Saturn", "moons": 146, "extra": "ignored"}]
    stub.script(Reply(tool_calls=(("final_result", {"rows": rows}),)))
    got = table(client, f"SELECT name, moons AS n, question FROM {agent} WHERE question = 'gas giants?'")
    assert got == [
        {"name": "Jupiter", "n": 95, "question": "gas giants?"},
        {"name": "Saturn", "n": 146, "question": "gas giants?"},
    ]
    offered = {t["function"]["name"]: t["function"] for t in stub.requests[-1].body["tools"]}
    schema = json.dumps(offered["final_result"]["parameters"])
    assert '"name"' in schema and '"moons"' in schema
    assert "columns name, moons" in stub.requests[-1].messages[0]["content"]

    # a plain-text answer fills `answer`; the other columns are NULL (MindsDB 26.1's text mode)
    stub.script(text("Jupiter and Saturn"))
    got = table(client, f"SELECT answer, name FROM {agent} WHERE question = 'gas giants?'")
    assert got == [{"answer": "Jupiter and Saturn", "name": None}]

    # the extractive model (no LLM) always answers in text
    plain = f"plain_{unique}"
    assert client.post(f"{P}/agents", json={"agent": {"name": plain}}).status_code == 201
    (row,) = table(client, f"SELECT answer, name FROM {plain} WHERE question = 'anything?'")
    assert row["name"] is None and isinstance(row["answer"], str) and row["answer"]
