"""`GET /api/config/`: MindsDB 26.1's shape, secrets masked."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import ServedApp


def test_config_shape_and_masking(settings: Any) -> None:
    model = {
        "provider": "openai",
        "model_name": "gpt-4o",
        "api_key": "sk-config-secret",
        "base_url": "http://x",
    }
    embedder = {"provider": "openai", "model_name": "text-embedding-3-small", "api_key": "sk-embed-secret"}
    own = settings.model_copy(
        update={"default_model": model, "default_embedding_model": embedder, "worker_enabled": False}
    )
    with ServedApp(own) as app, httpx.Client(base_url=app.url) as client:
        response = client.get("/api/config/")
        assert response.status_code == 200, response.text
        assert client.get("/api/config").json() == response.json()  # both forms, no redirect
    assert "sk-config-secret" not in response.text and "sk-embed-secret" not in response.text
    config = response.json()
    assert config["auth"] == {"http_auth_enabled": False}
    assert config["default_llm"] == {**model, "api_key": "******"}
    assert config["default_embedding_model"] == {**embedder, "api_key": "******"}
    kbs = config["knowledge_bases"]
    assert kbs["storage"] == kbs["default_storage"] == "pgvector"
    assert kbs["available_vector_engines"] == ["pgvector"] and kbs["pgvector_enabled"] is True
    assert config["api"]["http"]["running"] is True
