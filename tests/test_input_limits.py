"""Input that PostgreSQL or stored JSON cannot hold is refused with a 400, never a 500 (schemathesis found
each of these once)."""

from __future__ import annotations

import httpx

from tests.openai_stub import OpenAIStub

P = "/api/projects/mindsdb"


def _kb(client: httpx.Client, name: str, stub: OpenAIStub) -> None:
    body = {"knowledge_base": {"name": name, "embedding_model": stub.embedding_model()}}
    assert client.post(f"{P}/knowledge_bases", json=body).status_code == 201


def test_integers_beyond_64_bits_are_refused(client: httpx.Client, unique: str) -> None:
    huge = 2**64
    with OpenAIStub() as stub:
        _kb(client, f"big_{unique}", stub)
        answers = [
            client.post(f"{P}/agents", json={"agent": {"name": f"a_{unique}", "params": {"n": huge}}}),
            client.post(
                f"{P}/knowledge_bases",
                json={"knowledge_base": {"name": f"b_{unique}", "params": {"n": huge}}},
            ),
            client.put(
                f"{P}/knowledge_bases/big_{unique}",
                json={"knowledge_base": {"rows": [{"id": huge, "content": "x"}]}},
            ),
        ]
    for answer in answers:
        assert answer.status_code == 400, answer.text
        assert "64 bits" in answer.json()["detail"]


def test_nul_characters_are_refused(client: httpx.Client, unique: str) -> None:
    with OpenAIStub() as stub:
        _kb(client, f"nul_{unique}", stub)
        insert = client.put(
            f"{P}/knowledge_bases/nul_{unique}", json={"knowledge_base": {"query": "SELECT \x00"}}
        )
        search = client.post(f"{P}/knowledge_bases/nul_{unique}/search", json={"query": "a\x00b"})
        search_filter = client.post(
            f"{P}/knowledge_bases/nul_{unique}/search", json={"query": "a", "filters": {"k": "v\x00"}}
        )
    for answer in (insert, search, search_filter):
        assert answer.status_code == 400, answer.text
        assert "NUL" in answer.json()["detail"]


def test_nul_characters_in_an_agents_top_level_model_fields_are_refused(
    client: httpx.Client, unique: str
) -> None:
    """`model_name` / `provider` given beside `model` (MindsDB's flat form) are folded into the stored model:
    a NUL there is a 400 too, not PostgreSQL's refusal of the JSON as a 500."""
    name = f"nul_agent_{unique}"
    created = client.post(f"{P}/agents", json={"agent": {"name": name, "model_name": "gpt\x00x"}})
    assert created.status_code == 400 and "NUL" in created.json()["detail"], created.text
    assert client.post(f"{P}/agents", json={"agent": {"name": name}}).status_code == 201
    for fields in ({"model_name": "gpt\x00x"}, {"model_name": "gpt\x00x", "provider": "openai"}):
        updated = client.put(f"{P}/agents/{name}", json={"agent": fields})
        assert updated.status_code == 400 and "NUL" in updated.json()["detail"], updated.text
    assert client.get(f"{P}/agents/{name}").json()["model"]["model_name"] != "gpt\x00x"


def test_deep_pages_of_a_content_search(client: httpx.Client, unique: str) -> None:
    """limit + offset past 250 asks HNSW for more than pgvector's 1000 candidates: iterative scan serves it."""
    rows = [{"id": i, "content": f"note number {i} about routers"} for i in range(400)]
    with OpenAIStub() as stub:
        _kb(client, f"deep_{unique}", stub)
        assert (
            client.put(
                f"{P}/knowledge_bases/deep_{unique}", json={"knowledge_base": {"rows": rows}}
            ).status_code
            == 200
        )
        page = client.post(
            f"{P}/knowledge_bases/deep_{unique}/search",
            json={"query": "routers", "limit": 100, "offset": 280, "hybrid_search": False},
        )
        too_far = client.post(
            f"{P}/knowledge_bases/deep_{unique}/search", json={"query": "x", "offset": 2**63}
        )
    assert page.status_code == 200, page.text
    assert len(page.json()) == 100
    assert too_far.status_code == 400
