"""Ported from MindsDB `tests/unit/api/http/agents_test.py` @v26.1.0.

MindsDB runs these with a Flask test client on a fresh app per module; here the same requests go over real
HTTP to an agentkb of this module's own (tests/compat/conftest.py), in file order, as MindsDB's do.

Adaptations:
- `create_demo_db` registers MindsDB's `example_db` (samples.mindsdb.com); here `example_db` is a postgres
  data source (a scratch database in the suite's embedded PostgreSQL) holding the tables the tests name.
  `create_dummy_ml` and the `test_model` model are not ported (agentkb has no models).
- `check_agent_data` is patched in MindsDB (no check that `example_db.customers` or `example_kb` exist); here
  they exist. `check_agent_llm` is patched (no LLM call on create); agentkb makes none.
- `PydanticAIAgent` is patched to answer "beepboop"; here the scripted LLM answers it.
- Spec difference: every agent record carries `data`, `model` and `prompt_template` (spec 2.1, 4.1-4.3), so the
  expected records include them even where MindsDB's omit empty ones.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import httpx
import pandas as pd

from tests.compat.mdb import MindsDBEmbeddings, MindsDBLLM, postgres_tables
from tests.compat.stubs import text


def create_demo_db(client: httpx.Client) -> None:
    """MindsDB's conftest.create_demo_db, with the demo tables in the embedded PostgreSQL."""
    tables = {
        "customers": pd.DataFrame([[1, "Ada", "ada@example.com"]], columns=["id", "name", "email"]),
        "orders": pd.DataFrame([[1, 1, 9.5]], columns=["id", "customer_id", "total"]),
        "home_rentals": pd.DataFrame([["great", 900], ["good", 700]], columns=["location", "sqft"]),
    }
    example_db_data = {
        "database": {
            "name": "example_db",
            "engine": "postgres",
            "parameters": postgres_tables(tables, schema="demo_data"),
        }
    }
    response = client.post("/api/databases", json=example_db_data, follow_redirects=True)
    assert "201" in str(response.status_code)


def test_prepare(client: httpx.Client, mdb_embeddings: MindsDBEmbeddings) -> None:
    """Origin: test_prepare (MindsDB agents_test.py @v26.1.0): the demo database; the dummy_ml model is not
    ported. `example_kb` (named by test_put_agent_update) is created, standing in for the patched
    check_agent_data."""
    create_demo_db(client)
    r = client.post(
        "/api/projects/mindsdb/knowledge_bases",
        json={"knowledge_base": {"name": "example_kb", "embedding_model": mdb_embeddings.mindsdb_model()}},
    )
    assert r.status_code == HTTPStatus.CREATED, r.text


def test_post_agent_depreciated(client: httpx.Client) -> None:
    """Origin: test_post_agent_depreciated (MindsDB @v26.1.0, marked deprecated there)."""
    create_request = {
        "agent": {
            "name": "test_post_agent_depreciated",
            "model": {"provider": "openai", "model_name": "test_model"},
            "params": {"timeout": 10},
        }
    }

    create_response = client.post("/api/projects/mindsdb/agents", json=create_request, follow_redirects=True)
    assert create_response.status_code == HTTPStatus.CREATED

    created_agent = create_response.json()

    expected_agent = {
        "name": "test_post_agent_depreciated",
        "model": {"provider": "openai", "model_name": "test_model"},
        "params": {"timeout": 10},
        "id": created_agent["id"],
        "project_id": created_agent["project_id"],
        "created_at": created_agent["created_at"],
        "updated_at": created_agent["updated_at"],
        # spec difference: data and prompt_template are always present
        "data": created_agent["data"],
        "prompt_template": created_agent["prompt_template"],
    }

    assert created_agent == expected_agent


def test_post_agent(client: httpx.Client) -> None:
    """Origin: test_post_agent (MindsDB @v26.1.0)."""
    create_request = {
        "agent": {
            "name": "TEST_post_agent",
            "model": {"model_name": "gpt-3.5-turbo", "provider": "openai", "api_key": "sk-..."},
            "data": {"tables": ["example_db.customers"]},
            "prompt_template": "example_db.customers stores customers data",
        }
    }

    create_response = client.post("/api/projects/mindsdb/agents", json=create_request, follow_redirects=True)
    assert create_response.status_code == HTTPStatus.CREATED

    created_agent = create_response.json()

    expected_agent = {
        "name": "TEST_post_agent",
        "model": {"model_name": "gpt-3.5-turbo", "provider": "openai", "api_key": "sk-..."},
        # spec difference (2.1): `data` carries both lists (MindsDB echoes only the keys sent)
        "data": {"tables": ["example_db.customers"], "knowledge_bases": []},
        "id": created_agent["id"],
        "project_id": created_agent["project_id"],
        "created_at": created_agent["created_at"],
        "updated_at": created_agent["updated_at"],
        "prompt_template": "example_db.customers stores customers data",
    }

    assert created_agent == expected_agent


def test_post_agent_no_agent(client: httpx.Client) -> None:
    """Origin: test_post_agent_no_agent (MindsDB @v26.1.0)."""
    create_request = {
        "name": "test_post_agent_no_agent",
        "model": {"model_name": "gpt-3.5-turbo", "provider": "openai", "api_key": "sk-..."},
        "data": {"tables": ["example_db.customers"]},
        "prompt_template": "example_db.customers stores customers data",
    }
    create_response = client.post("/api/projects/mindsdb/agents", json=create_request, follow_redirects=True)
    assert create_response.status_code == HTTPStatus.BAD_REQUEST


def test_post_agent_no_name(client: httpx.Client) -> None:
    """Origin: test_post_agent_no_name (MindsDB @v26.1.0)."""
    create_request = {
        "agent": {
            "model": {"model_name": "gpt-3.5-turbo", "provider": "openai", "api_key": "sk-..."},
            "data": {"tables": ["example_db.customers"]},
            "prompt_template": "example_db.customers stores customers data",
        }
    }
    create_response = client.post("/api/projects/mindsdb/agents", json=create_request, follow_redirects=True)
    assert create_response.status_code == HTTPStatus.BAD_REQUEST


def test_post_agent_project_not_found(client: httpx.Client) -> None:
    """Origin: test_post_agent_project_not_found (MindsDB @v26.1.0)."""
    create_request = {
        "agent": {
            "name": "test_post_agent_no_model_name",
            "model": {"model_name": "gpt-3.5-turbo", "provider": "openai", "api_key": "sk-..."},
            "data": {"tables": ["example_db.customers"]},
            "prompt_template": "example_db.customers stores customers data",
        }
    }
    create_response = client.post("/api/projects/womp/agents", json=create_request, follow_redirects=True)
    assert create_response.status_code == HTTPStatus.NOT_FOUND


def test_post_agent_model_not_found(client: httpx.Client) -> None:
    """Origin: test_post_agent_model_not_found (MindsDB @v26.1.0, marked deprecated there): provider 'mindsdb'
    names a MindsDB model, and an unknown one is a 404."""
    create_request = {
        "agent": {
            "name": "test_post_agent_model_not_found",
            "model_name": "not_the_model_youre_looking_for",
            "params": {"k1": "v1"},
            "provider": "mindsdb",
        }
    }
    create_response = client.post("/api/projects/mindsdb/agents", json=create_request, follow_redirects=True)
    assert create_response.status_code == HTTPStatus.NOT_FOUND


def test_get_agents(client: httpx.Client) -> None:
    """Origin: test_get_agents (MindsDB @v26.1.0)."""
    create_request = {
        "agent": {
            "name": "test_get_agents",
            "model": {"model_name": "gpt-3.5-turbo", "provider": "openai", "api_key": "sk-..."},
            "data": {"tables": ["example_db.customers"]},
            "prompt_template": "example_db.customers stores customers data",
        }
    }

    client.post("/api/projects/mindsdb/agents", json=create_request, follow_redirects=True)

    get_response = client.get("/api/projects/mindsdb/agents", follow_redirects=True)
    assert get_response.status_code == HTTPStatus.OK
    all_agents = get_response.json()
    assert len(all_agents) > 0


def test_get_agents_project_not_found(client: httpx.Client) -> None:
    """Origin: test_get_agents_project_not_found (MindsDB @v26.1.0)."""
    get_response = client.get("/api/projects/bloop/agents", follow_redirects=True)
    assert get_response.status_code == HTTPStatus.NOT_FOUND


def test_get_agent(client: httpx.Client) -> None:
    """Origin: test_get_agent (MindsDB @v26.1.0)."""
    create_request = {
        "agent": {
            "name": "test_get_agent",
            "model": {"model_name": "gpt-3.5-turbo", "provider": "openai", "api_key": "sk-..."},
            "data": {"tables": ["example_db.customers"]},
            "prompt_template": "example_db.customers stores customers data",
        }
    }

    client.post("/api/projects/mindsdb/agents", json=create_request, follow_redirects=True)

    get_response = client.get("/api/projects/mindsdb/agents/test_get_agent", follow_redirects=True)
    assert get_response.status_code == HTTPStatus.OK
    agent = get_response.json()

    expected_agent = {
        "name": "test_get_agent",
        "model": {"model_name": "gpt-3.5-turbo", "provider": "openai", "api_key": "sk-..."},
        # spec difference (2.1): `data` carries both lists (MindsDB echoes only the keys sent)
        "data": {"tables": ["example_db.customers"], "knowledge_bases": []},
        "prompt_template": "example_db.customers stores customers data",
        "id": agent["id"],
        "project_id": agent["project_id"],
        "created_at": agent["created_at"],
        "updated_at": agent["updated_at"],
    }

    assert agent == expected_agent


def test_get_agent_project_not_found(client: httpx.Client) -> None:
    """Origin: test_get_agent_project_not_found (MindsDB @v26.1.0)."""
    get_response = client.get("/api/projects/bloop/agents/test_get_agent", follow_redirects=True)
    assert get_response.status_code == HTTPStatus.NOT_FOUND


def test_put_agent_update_depreciated(client: httpx.Client) -> None:
    """Origin: test_put_agent_update_depreciated (MindsDB @v26.1.0, marked deprecated there)."""
    create_request = {
        "agent": {
            "name": "test_put_agent_update_depreciated",
            "model": {"provider": "openai", "model_name": "test_model"},
            "params": {"timeout": 10},
        }
    }

    response = client.post("/api/projects/mindsdb/agents", json=create_request, follow_redirects=True)
    assert response.status_code == HTTPStatus.CREATED

    update_request = {
        "agent": {
            "params": {"timeout": 20},
        }
    }

    update_response = client.put(
        "/api/projects/mindsdb/agents/test_put_agent_update_depreciated",
        json=update_request,
        follow_redirects=True,
    )
    updated_agent = update_response.json()

    expected_agent = {
        "name": "test_put_agent_update_depreciated",
        "model": {"provider": "openai", "model_name": "test_model"},
        "params": {"timeout": 20},
        "id": updated_agent["id"],
        "project_id": updated_agent["project_id"],
        "created_at": updated_agent["created_at"],
        "updated_at": updated_agent["updated_at"],
        # spec difference: data and prompt_template are always present
        "data": updated_agent["data"],
        "prompt_template": updated_agent["prompt_template"],
    }

    assert updated_agent == expected_agent


def test_put_agent_update(client: httpx.Client) -> None:
    """Origin: test_put_agent_update (MindsDB @v26.1.0, marked deprecated there)."""
    create_request = {
        "agent": {
            "name": "test_put_agent_update",
            "model": {"model_name": "gpt-3.5-turbo", "provider": "openai", "api_key": "sk-..."},
            "data": {"tables": ["example_db.customers"]},
            "prompt_template": "example_db.customers stores customers data",
        }
    }

    response = client.post("/api/projects/mindsdb/agents", json=create_request, follow_redirects=True)
    assert response.status_code == HTTPStatus.CREATED

    update_request = {
        "agent": {
            "params": {"timeout": 5},
            "data": {
                "tables": ["example_db.customers", "example_db.orders"],
                "knowledge_bases": ["example_kb"],
            },
        }
    }

    update_response = client.put(
        "/api/projects/mindsdb/agents/test_put_agent_update", json=update_request, follow_redirects=True
    )
    updated_agent = update_response.json()

    expected_agent = {
        "name": "test_put_agent_update",
        "params": {"timeout": 5},
        "id": updated_agent["id"],
        "project_id": updated_agent["project_id"],
        "created_at": updated_agent["created_at"],
        "updated_at": updated_agent["updated_at"],
        "data": {
            "tables": ["example_db.customers", "example_db.orders"],
            # spec difference (2.1): knowledge_bases entries are '<project>.<knowledge_base>'
            "knowledge_bases": ["mindsdb.example_kb"],
        },
        "model": {"model_name": "gpt-3.5-turbo", "provider": "openai", "api_key": "sk-..."},
        "prompt_template": "example_db.customers stores customers data",
    }

    assert updated_agent == expected_agent


def test_put_agent_no_agent(client: httpx.Client) -> None:
    """Origin: test_put_agent_no_agent (MindsDB @v26.1.0)."""
    create_request = {
        "name": "test_put_agent_no_agent",
        "model": {"model_name": "gpt-3.5-turbo", "provider": "openai", "api_key": "sk-..."},
        "data": {"tables": ["example_db.customers"]},
        "prompt_template": "example_db.customers stores customers data",
    }

    response = client.put(
        "/api/projects/mindsdb/agents/test_put_agent_no_agent", json=create_request, follow_redirects=True
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST


def test_delete_agent(client: httpx.Client) -> None:
    """Origin: test_delete_agent (MindsDB @v26.1.0)."""
    create_request = {
        "agent": {
            "name": "test_delete_agent",
            "model": {"model_name": "gpt-3.5-turbo", "provider": "openai", "api_key": "sk-..."},
            "data": {"tables": ["example_db.customers"]},
            "prompt_template": "example_db.customers stores customers data",
        }
    }

    client.post("/api/projects/mindsdb/agents", json=create_request, follow_redirects=True)

    delete_response = client.delete("/api/projects/mindsdb/agents/test_delete_agent", follow_redirects=True)
    assert delete_response.status_code == HTTPStatus.NO_CONTENT

    get_response = client.get("/api/projects/mindsdb/agents/test_delete_agent", follow_redirects=True)
    assert get_response.status_code == HTTPStatus.NOT_FOUND


def test_delete_agent_project_not_found(client: httpx.Client) -> None:
    """Origin: test_delete_agent_project_not_found (MindsDB @v26.1.0)."""
    delete_response = client.delete("/api/projects/doop/agents/test_post_agent", follow_redirects=True)
    assert delete_response.status_code == HTTPStatus.NOT_FOUND


def test_delete_agent_not_found(client: httpx.Client) -> None:
    """Origin: test_delete_agent_not_found (MindsDB @v26.1.0)."""
    delete_response = client.delete(
        "/api/projects/mindsdb/agents/test_delete_agent_not_found", follow_redirects=True
    )
    assert delete_response.status_code == HTTPStatus.NOT_FOUND


def test_agent_completions(client: httpx.Client, llm: MindsDBLLM) -> None:
    """Origin: test_agent_completions (MindsDB @v26.1.0). MindsDB's agent has `provider: mindsdb` and the
    agent class is patched; here the legacy top-level `model_name`/`provider` name an OpenAI-compatible model
    whose key and URL travel in `params` (MindsDB 25.14 hands an agent's params to its LLM), and the scripted
    LLM answers "beepboop"."""
    llm.reset()
    create_request: dict[str, Any] = {
        "agent": {
            "name": "test_agent",
            "model_name": "test_model",
            "provider": "openai",
            "params": {"prompt_template": "Test message!", "api_key": "sk-test", "base_url": llm.base_url},
        }
    }

    create_response = client.post("/api/projects/mindsdb/agents", json=create_request, follow_redirects=True)
    assert create_response.status_code == HTTPStatus.CREATED

    completions_request = {"messages": [{"role": "user", "content": "Test message!"}]}

    llm.script(text("beepboop"))
    completions_response = client.post(
        "/api/projects/mindsdb/agents/test_agent/completions", json=completions_request, follow_redirects=True
    )

    assert completions_response.status_code == HTTPStatus.OK
    message_json = completions_response.json()["message"]
    assert message_json["content"] == "beepboop"


def test_agent_completions_project_not_found(client: httpx.Client) -> None:
    """Origin: test_agent_completions_project_not_found (MindsDB @v26.1.0)."""
    completions_request = {"messages": [{"role": "user", "content": "Test message!"}]}
    completions_response = client.post(
        "/api/projects/bloop/agents/test_agent/completions", json=completions_request, follow_redirects=True
    )
    assert completions_response.status_code == HTTPStatus.NOT_FOUND


def test_agent_completions_bad_request(client: httpx.Client) -> None:
    """Origin: test_agent_completions_bad_request (MindsDB @v26.1.0)."""
    completions_request = {"massagez": [{"role": "user", "content": "Test message!"}]}
    completions_response = client.post(
        "/api/projects/mindsdb/agents/test_agent/completions", json=completions_request, follow_redirects=True
    )
    assert completions_response.status_code == HTTPStatus.BAD_REQUEST


def test_agent_completions_agent_not_found(client: httpx.Client) -> None:
    """Origin: test_agent_completions_agent_not_found (MindsDB @v26.1.0)."""
    completions_request = {"messages": [{"role": "user", "content": "Test message!"}]}
    completions_response = client.post(
        "/api/projects/mindsdb/agents/zoopy_agent/completions",
        json=completions_request,
        follow_redirects=True,
    )
    assert completions_response.status_code == HTTPStatus.NOT_FOUND
