"""Two agentkb servers on one PostgreSQL: what one writes, the other's searches see at once, whatever
each process has cached (KB rows, revealed configurations, BM25 indexes, metadata columns, parsed
statements). Writes go through server A, searches through server B, over REST and the SQL endpoint, on
the vector side (`hybrid_search: false`, the query the very text of a row: the stub embeds equal texts
equally) and the lexical side (`hybrid_search_alpha: 0`, BM25 alone)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.openai_stub import OpenAIStub

P = "/api/projects/mindsdb"


@pytest.fixture()
def stub() -> Iterator[OpenAIStub]:
    """16-dimensional vectors (equal texts, equal vectors)."""
    with OpenAIStub(dim=16) as server:
        yield server


def rows(tag: str, n: int = 6) -> list[dict[str, Any]]:
    return [
        {"id": f"{tag}-{i}", "body": f"note {i} about {tag} number{i} ordinary text", "topic": f"t{i % 2}"}
        for i in range(n)
    ]


def create(a: httpx.Client, kb: str, stub: OpenAIStub) -> None:
    r = a.post(
        f"{P}/knowledge_bases",
        json={
            "knowledge_base": {
                "name": kb,
                "embedding_model": stub.embedding_model(),
                "id_column": "id",
                "content_columns": ["body"],
            }
        },
    )
    assert r.status_code == 201, r.text


def insert(a: httpx.Client, kb: str, data: list[dict[str, Any]]) -> None:
    r = a.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": data}})
    assert r.status_code == 200, r.text


def rest(b: httpx.Client, kb: str, query: str, **body: Any) -> list[str]:
    r = b.post(f"{P}/knowledge_bases/{kb}/search", json={"query": query, "limit": 3, **body})
    assert r.status_code == 200, r.text
    return [h["id"] for h in r.json()]


def sql(b: httpx.Client, query: str) -> dict[str, Any]:
    r = b.post("/api/sql/query", json={"query": query, "context": {"db": "mindsdb"}})
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    assert answer["type"] == "table", answer
    return answer


def sql_ids(b: httpx.Client, kb: str, condition: str) -> list[str]:
    answer = sql(b, f"SELECT * FROM mindsdb.{kb} WHERE {condition} LIMIT 3")
    return [row[answer["column_names"].index("id")] for row in answer["data"]]


def seen(b: httpx.Client, kb: str, row: dict[str, Any], token: str) -> dict[str, bool]:
    """Whether B finds `row` first on each path."""
    text = row["body"]
    return {
        "rest vector": rest(b, kb, text, hybrid_search=False)[:1] == [row["id"]],
        "rest bm25": rest(b, kb, token, hybrid_search_alpha=0)[:1] == [row["id"]],
        "rest hybrid": row["id"] in rest(b, kb, text),
        "sql vector": sql_ids(b, kb, f"content = '{text}' AND hybrid_search = false")[:1] == [row["id"]],
        "sql bm25": sql_ids(b, kb, f"content = '{token}' AND hybrid_search_alpha = 0")[:1] == [row["id"]],
    }


def test_writes_through_one_server_are_searched_at_once_through_another(
    client: httpx.Client, second: httpx.Client, stub: OpenAIStub, unique: str
) -> None:
    a, b = client, second
    kb = f"xproc_{unique}"
    create(a, kb, stub)
    insert(a, kb, rows("alpha"))
    # B warms every cache it has: the KB row, the BM25 index, the parsed statement shapes, the columns
    assert rest(b, kb, "number3", hybrid_search_alpha=0)[:1] == ["alpha-3"]
    assert sql_ids(b, kb, "content = 'number2' AND hybrid_search_alpha = 0")[:1] == ["alpha-2"]
    assert sql_ids(b, kb, "content = 'note 1 about alpha' AND hybrid_search = false")
    columns = sql(b, f"SELECT * FROM mindsdb.{kb} WHERE content = 'alpha' LIMIT 1")["column_names"]
    assert "colour" not in columns

    # an insert through A, with a new word and a new metadata key
    new = {"id": "beta-9", "body": "a zyzzyvaquark appears in beta nine", "topic": "t1", "colour": "red"}
    insert(a, kb, [new])
    assert seen(b, kb, new, "zyzzyvaquark") == dict.fromkeys(
        ("rest vector", "rest bm25", "rest hybrid", "sql vector", "sql bm25"), True
    )
    answer = sql(b, f"SELECT * FROM mindsdb.{kb} WHERE content = 'zyzzyvaquark' LIMIT 1")
    assert "colour" in answer["column_names"]  # the new key is a column on B too
    assert sql_ids(b, kb, "content = 'beta' AND colour = 'red'") == ["beta-9"]  # not 'Column is not found'

    # a document deleted through A is gone from B's answers on every path
    r = a.request("DELETE", f"{P}/knowledge_bases/{kb}", json={"ids": ["beta-9"]})
    assert r.status_code == 200, r.text
    assert "beta-9" not in rest(b, kb, "zyzzyvaquark", hybrid_search_alpha=0)
    assert "beta-9" not in rest(b, kb, new["body"], hybrid_search=False)
    assert "beta-9" not in sql_ids(b, kb, "content = 'zyzzyvaquark' AND hybrid_search_alpha = 0")
    assert "beta-9" not in sql_ids(b, kb, f"content = '{new['body']}' AND hybrid_search = false")

    # the KB dropped and created again under its name through A: B searches the new one
    assert a.delete(f"{P}/knowledge_bases/{kb}").status_code == 204
    create(a, kb, stub)
    again = rows("gamma", 4)
    insert(a, kb, again)
    assert rest(b, kb, "number3", hybrid_search_alpha=0)[:1] == ["gamma-3"]
    assert rest(b, kb, again[1]["body"], hybrid_search=False)[:1] == ["gamma-1"]
    assert sql_ids(b, kb, "content = 'number2' AND hybrid_search_alpha = 0")[:1] == ["gamma-2"]
    assert sql_ids(b, kb, f"content = '{again[0]['body']}' AND hybrid_search = false")[:1] == ["gamma-0"]
    assert not {i for i in rest(b, kb, "alpha") if i.startswith("alpha")}

    # dropped through A: a 404 from B, not an answer from its caches
    assert a.delete(f"{P}/knowledge_bases/{kb}").status_code == 204
    assert b.post(f"{P}/knowledge_bases/{kb}/search", json={"query": "x"}).status_code == 404
    r = b.post("/api/sql/query", json={"query": f"SELECT * FROM mindsdb.{kb} WHERE content = 'x'"})
    assert r.json()["type"] == "error"
