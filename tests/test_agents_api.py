"""Agent resource endpoints over real HTTP against real Postgres (spec 2.1, 4.1-4.3)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.helpers import RECORD_KEYS, TIMESTAMP, assert_problem


def spec_agent(name: str) -> dict[str, object]:
    return {
        "agent": {
            "name": name,
            "model": {"provider": "openai", "model_name": "gpt-4o", "api_key": "sk-test-123"},
            "data": {
                "knowledge_bases": ["mindsdb.sales_kb", "mindsdb.*"],
                "tables": ["pg_db.orders", "pg_db.*"],
            },
            "prompt_template": "mindsdb.sales_kb holds sales notes; pg_db.orders holds orders.",
        }
    }


def test_create_returns_spec_record(client: httpx.Client, unique: str) -> None:
    body = spec_agent(f"agent_{unique}")
    r = client.post("/api/projects/mindsdb/agents", json=body)
    assert r.status_code == 201, r.text
    record = r.json()
    assert set(record) >= RECORD_KEYS
    assert isinstance(record["id"], int) and isinstance(record["project_id"], int)
    assert TIMESTAMP.match(record["created_at"]) and TIMESTAMP.match(record["updated_at"])
    assert record["name"] == body["agent"]["name"]  # type: ignore[index]
    assert record["model"] == body["agent"]["model"]  # type: ignore[index]  # api_key echoed, per spec
    assert record["data"] == body["agent"]["data"]  # type: ignore[index]
    assert record["prompt_template"] == body["agent"]["prompt_template"]  # type: ignore[index]


def test_get_list_and_delete(client: httpx.Client, unique: str) -> None:
    name = f"agent_{unique}"
    created = client.post("/api/projects/mindsdb/agents", json=spec_agent(name)).json()
    assert client.get(f"/api/projects/mindsdb/agents/{name}").json() == created
    listed = client.get("/api/projects/mindsdb/agents").json()
    assert created in listed
    assert client.delete(f"/api/projects/mindsdb/agents/{name}").status_code == 204
    assert_problem(client.get(f"/api/projects/mindsdb/agents/{name}"), 404)
    assert_problem(client.delete(f"/api/projects/mindsdb/agents/{name}"), 404)
    assert all(a["name"] != name for a in client.get("/api/projects/mindsdb/agents").json())


def test_default_model_when_none_given(client: httpx.Client, unique: str) -> None:
    r = client.post("/api/projects/mindsdb/agents", json={"agent": {"name": f"plain_{unique}"}})
    assert r.status_code == 201
    assert r.json()["model"] == {"provider": "extractive", "model_name": "extractive"}
    assert r.json()["data"] == {"knowledge_bases": [], "tables": []}


def test_update_only_model_keeps_data_and_prompt(client: httpx.Client, unique: str) -> None:
    name = f"agent_{unique}"
    created = client.post("/api/projects/mindsdb/agents", json=spec_agent(name)).json()
    new_model = {"provider": "anthropic", "model_name": "claude-sonnet-4", "api_key": "sk-ant"}
    r = client.put(f"/api/projects/mindsdb/agents/{name}", json={"agent": {"model": new_model}})
    assert r.status_code == 200, r.text
    updated = r.json()
    assert updated["model"] == new_model
    assert updated["data"] == created["data"]
    assert updated["prompt_template"] == created["prompt_template"]
    assert updated["created_at"] == created["created_at"]
    assert updated["updated_at"] > created["updated_at"]
    assert client.get(f"/api/projects/mindsdb/agents/{name}").json() == updated


def test_update_merges_and_renames(client: httpx.Client, unique: str) -> None:
    name = f"agent_{unique}"
    client.post("/api/projects/mindsdb/agents", json=spec_agent(name))
    r = client.put(
        f"/api/projects/mindsdb/agents/{name}",
        json={
            "agent": {"name": f"renamed_{unique}", "prompt_template": "new prompt", "params": {"timeout": 30}}
        },
    )
    assert r.status_code == 200, r.text
    assert r.json()["name"] == f"renamed_{unique}"
    assert r.json()["prompt_template"] == "new prompt"
    assert r.json()["params"] == {"timeout": 30}
    assert r.json()["model"]["model_name"] == "gpt-4o"
    assert_problem(client.get(f"/api/projects/mindsdb/agents/{name}"), 404)


def test_sdk_style_bodies_with_nulls(client: httpx.Client, unique: str) -> None:
    """mindsdb_sdk sends every field, unset ones as null, plus top-level model_name/provider/params."""
    name = f"sdk_{unique}"
    create = {
        "agent": {
            "name": name,
            "model_name": "gpt-4o-mini",
            "provider": "openai",
            "data": {"knowledge_bases": ["kb_docs"]},
            "model": None,
            "prompt_template": None,
            "params": {"timeout": 10},
        }
    }
    r = client.post("/api/projects/mindsdb/agents", json=create)
    assert r.status_code == 201, r.text
    record = r.json()
    assert record["model"] == {"provider": "openai", "model_name": "gpt-4o-mini"}
    assert record["data"]["knowledge_bases"] == ["mindsdb.kb_docs"]
    assert record["params"] == {"timeout": 10}
    update = {
        "agent": {
            "name": name,
            "model_name": None,
            "provider": None,
            "data": None,
            "model": None,
            "prompt_template": "answer briefly",
            "params": {},
        }
    }
    r = client.put(f"/api/projects/mindsdb/agents/{name}", json=update)
    assert r.status_code == 200, r.text
    assert r.json()["model"] == record["model"]
    assert r.json()["data"] == record["data"]
    assert r.json()["prompt_template"] == "answer briefly"


def test_ids_accepted_as_strings_or_ints(client: httpx.Client, unique: str) -> None:
    for i, value in enumerate(["7", 7]):
        body = spec_agent(f"ids_{i}_{unique}")
        body["agent"]["id"] = value  # type: ignore[index]
        body["agent"]["project_id"] = value  # type: ignore[index]
        r = client.post("/api/projects/mindsdb/agents", json=body)
        assert r.status_code == 201, r.text
        assert isinstance(r.json()["id"], int)
        assert r.json()["project_id"] == 1


def test_duplicate_name_conflicts(client: httpx.Client, unique: str) -> None:
    body = spec_agent(f"dup_{unique}")
    assert client.post("/api/projects/mindsdb/agents", json=body).status_code == 201
    problem = assert_problem(client.post("/api/projects/mindsdb/agents", json=body), 409)
    assert "already exists" in problem["detail"]


def test_concurrent_creates_of_one_name(base_url: str, unique: str) -> None:
    body = spec_agent(f"race_{unique}")

    def post(_: int) -> int:
        with httpx.Client(base_url=base_url, timeout=60) as c:
            return c.post("/api/projects/mindsdb/agents", json=body).status_code

    with ThreadPoolExecutor(max_workers=12) as pool:
        codes = list(pool.map(post, range(12)))
    assert sorted(codes) == [201] + [409] * 11
    with httpx.Client(base_url=base_url) as c:
        names = [a["name"] for a in c.get("/api/projects/mindsdb/agents").json()]
    assert names.count(f"race_{unique}") == 1


def test_unknown_project_and_agent(client: httpx.Client, unique: str) -> None:
    assert_problem(client.get("/api/projects/no_such_project/agents"), 404)
    assert_problem(client.post("/api/projects/no_such_project/agents", json=spec_agent(f"a_{unique}")), 404)
    assert_problem(client.get(f"/api/projects/mindsdb/agents/missing_{unique}"), 404)
    r = client.put(f"/api/projects/mindsdb/agents/missing_{unique}", json={"agent": {"prompt_template": "x"}})
    assert_problem(r, 404)


def test_bad_bodies_are_400_naming_the_field(client: httpx.Client, unique: str) -> None:
    cases: list[tuple[object, str]] = [
        ({}, "agent"),
        ({"agent": {}}, "name"),
        ({"agent": {"name": "1starts_with_digit"}}, "name"),
        ({"agent": {"name": "x" * 65}}, "name"),
        ({"agent": {"name": "has-dash"}}, "name"),
        ({"agent": {"name": f"a_{unique}", "data": {"knowledge_bases": ["a.b.c"]}}}, "data.knowledge_bases"),
        ({"agent": {"name": f"a_{unique}", "data": {"tables": ["no_dot"]}}}, "data.tables"),
        ({"agent": {"name": f"a_{unique}", "data": {"knowledge_base": ["kb"]}}}, "knowledge_base"),
        ({"agent": {"name": f"a_{unique}", "model": {"provider": "nope", "model_name": "m"}}}, "provider"),
        ({"agent": {"name": f"a_{unique}", "prompt_template": "nul\x00byte"}}, "prompt_template"),
        ({"agent": {"name": 5}}, "name"),
        ([1, 2], "JSON object"),
    ]
    for body, field in cases:
        problem = assert_problem(client.post("/api/projects/mindsdb/agents", json=body), 400)
        assert field in problem["detail"], (body, problem)
    r = client.post(
        "/api/projects/mindsdb/agents", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert_problem(r, 400)


def test_oversized_body_is_413(client: httpx.Client, settings: object) -> None:
    limit = settings.max_body_bytes  # type: ignore[attr-defined]
    r = client.post(
        "/api/projects/mindsdb/agents",
        content=b"x" * (limit + 1),
        headers={"content-type": "application/json"},
    )
    assert_problem(r, 413)


def test_unknown_route_is_problem_json(client: httpx.Client) -> None:
    assert_problem(client.get("/api/nothing_here"), 404)
