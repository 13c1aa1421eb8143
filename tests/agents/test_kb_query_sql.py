"""An agent's `kb_query_tool` runs its SELECT through the SQL endpoint's KB executor: OR, NOT, metadata
columns and `Column is not found` answer as `POST /api/sql/query` answers them. The agent is driven over real
HTTP by the scripted LLM, and the observation checked is the tool message the LLM is sent back."""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.helpers import create_agent, stub_llm
from tests.openai_stub import OpenAIStub, text, tool_call

KB_ERROR_END = ". Please check that the knowledge base exists and your query syntax is correct."
FRUIT = [  # (id, content, author): ann wrote about orchards, zed about boats
    *((i, f"Apple orchard note {i}: crisp red apples picked in autumn.", "ann") for i in range(1, 13)),
    (13, "Sailing boats need a steady wind and a calm harbour.", "zed"),
    (14, "A rowing boat is slow but it needs no wind at all.", "zed"),
]


def sql(client: httpx.Client, query: str) -> dict[str, Any]:
    r = client.post("/api/sql/query", json={"query": query, "context": {"db": "mindsdb"}})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def agent(base_url: str, stub: OpenAIStub) -> Iterator[tuple[str, str]]:
    """(agent, KB): a KB of notes with the inserted metadata column `author`, and an agent given it."""
    u = uuid.uuid4().hex[:8]
    kb, agent = f"notes_{u}", f"kbsql_{u}"
    with httpx.Client(base_url=base_url, timeout=120) as client:
        assert sql(client, f"CREATE KNOWLEDGE_BASE {kb}")["type"] == "ok"
        values = ", ".join(f"({i}, '{content}', '{author}')" for i, content, author in FRUIT)
        inserted = sql(client, f"INSERT INTO {kb} (id, content, author) VALUES {values}")
        assert inserted["type"] == "ok", inserted
        create_agent(client, agent, model=stub_llm(stub), data={"knowledge_bases": [f"mindsdb.{kb}"]})
        yield agent, kb
        client.delete(f"/api/projects/mindsdb/agents/{agent}")
        sql(client, f"DROP KNOWLEDGE_BASE {kb}")


def observe(client: httpx.Client, stub: OpenAIStub, agent: str, query: str) -> str:
    """The observation of one `kb_query_tool` call with `query`, as the LLM is sent it."""
    stub.script(tool_call("kb_query_tool", query), text("Done."))
    r = client.post(
        f"/api/projects/mindsdb/agents/{agent}/completions",
        json={"messages": [{"question": "What do the notes say?", "answer": None}]},
    )
    assert r.status_code == 200, r.text
    chats = [req for req in stub.requests if req.path.endswith("/chat/completions")]
    assert len(chats) == 2, chats
    message = chats[1].messages[-1]
    assert message["role"] == "tool", message
    return str(message["content"])


def as_observation(answer: dict[str, Any]) -> str:
    """The SQL endpoint's table as the tool's observation writes it (MindsDB's: columns, then excel CSV)."""
    assert answer["type"] == "table", answer
    out = io.StringIO()
    csv.writer(out, dialect="excel").writerows(
        [answer["column_names"], *([str(v) for v in row] for row in answer["data"])]
    )
    columns = ", ".join(repr(c) for c in answer["column_names"])
    return f"Output columns: {columns}\nResult in CSV format (dialect is 'excel'):\n{out.getvalue()}"


def ids(answer: dict[str, Any]) -> list[int]:
    return [int(row[0]) for row in answer["data"]]


@pytest.mark.parametrize(
    "where",
    [
        "content = 'sailing in the wind' OR author = 'zed'",
        "author = 'zed' OR id = 3",
        "content = 'apples' OR author = 'zed'",
    ],
)
def test_or_answers_as_the_sql_endpoint(
    client: httpx.Client, stub: OpenAIStub, agent: tuple[str, str], where: str
) -> None:
    name, kb = agent
    query = f"SELECT id, author FROM mindsdb.{kb} WHERE {where}"
    answer = sql(client, query)
    assert {13, 14} <= set(ids(answer))  # zed's notes, found by the OR's metadata side
    assert observe(client, stub, name, query) == as_observation(answer)


def test_or_with_a_content_search_unites_both_sides(
    client: httpx.Client, stub: OpenAIStub, agent: tuple[str, str]
) -> None:
    """The content search gives its 10 best (MindsDB's default), the metadata side adds zed's notes."""
    name, kb = agent
    query = f"SELECT id, author FROM mindsdb.{kb} WHERE content = 'crisp red apples' OR author = 'zed'"
    answer = sql(client, query)
    got = ids(answer)
    assert len(got) == 12 and {13, 14} <= set(got) and len(set(got) - {13, 14}) == 10
    assert observe(client, stub, name, query) == as_observation(answer)


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("NOT author = 'ann'", [13, 14]),
        ("NOT (id < 13 OR id = 14)", [13]),
        ("author = 'zed' AND NOT id = 13", [14]),
    ],
)
def test_not_answers_as_the_sql_endpoint(
    client: httpx.Client, stub: OpenAIStub, agent: tuple[str, str], where: str, expected: list[int]
) -> None:
    name, kb = agent
    query = f"SELECT id, author FROM {kb} WHERE {where}"
    answer = sql(client, query)
    assert sorted(ids(answer)) == expected
    assert observe(client, stub, name, query) == as_observation(answer)


def test_unknown_column_is_the_sql_endpoints_error(
    client: httpx.Client, stub: OpenAIStub, agent: tuple[str, str]
) -> None:
    name, kb = agent
    for where in ("shade = 'red'", "author = 'zed' OR shade = 'red'", "NOT shade = 'red'"):
        query = f"SELECT * FROM {kb} WHERE {where}"
        answer = sql(client, query)
        assert answer["type"] == "error" and answer["error_message"] == "Column is not found: shade", answer
        assert observe(client, stub, name, query) == (
            "Error executing knowledge base query: Column is not found: shade" + KB_ERROR_END
        )


def test_metadata_filters_and_limit_answer_as_the_sql_endpoint(
    client: httpx.Client, stub: OpenAIStub, agent: tuple[str, str]
) -> None:
    """A metadata column the KB has is a filter and a column; LIMIT cuts the OR's union."""
    name, kb = agent
    query = f"SELECT id, author FROM {kb} WHERE author = 'zed'"
    answer = sql(client, query)
    assert sorted(ids(answer)) == [13, 14]
    assert observe(client, stub, name, query) == as_observation(answer)
    limited = f"SELECT id FROM {kb} WHERE author = 'ann' OR author = 'zed' LIMIT 5"
    answer = sql(client, limited)
    assert len(answer["data"]) == 5
    assert observe(client, stub, name, limited) == as_observation(answer)
