"""Assertions shared by the API tests."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from tests.openai_stub import OpenAIStub

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6}$")
RECORD_KEYS = {"id", "name", "project_id", "created_at", "updated_at", "data", "model", "prompt_template"}


def assert_problem(response: httpx.Response, status: int) -> dict[str, str]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    return body  # type: ignore[no-any-return]


def stub_kb(client: httpx.Client, name: str, stub: OpenAIStub, project: str = "mindsdb") -> None:
    """Create the knowledge base `name`, embedding with the OpenAI stub `stub`."""
    model = stub.embedding_model()
    r = client.post(
        f"/api/projects/{project}/knowledge_bases",
        json={"knowledge_base": {"name": name, "embedding_model": model}},
    )
    assert r.status_code == 201, r.text
