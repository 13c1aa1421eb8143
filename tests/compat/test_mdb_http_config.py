"""Ported from MindsDB `tests/unit/api/http/config_test.py` @v26.1.0."""

from __future__ import annotations

import httpx


def test_get_config_returns_knowledge_bases_storage(client: httpx.Client) -> None:
    """Origin: test_get_config_returns_knowledge_bases_storage (MindsDB @v26.1.0)."""
    response = client.get("/api/config/")

    assert response.status_code == 200
    payload = response.json()
    assert "knowledge_bases" in payload
    assert "storage" in payload["knowledge_bases"]
    assert "available_vector_engines" in payload["knowledge_bases"]
    assert "pgvector_enabled" in payload["knowledge_bases"]
