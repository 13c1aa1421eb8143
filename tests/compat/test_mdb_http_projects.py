"""Ported from MindsDB `tests/unit/api/http/projects_test.py` @v26.1.0 (a fresh agentkb for this module, as
MindsDB's module-scoped app)."""

from __future__ import annotations

from http import HTTPStatus

import httpx


def test_get_projects(client: httpx.Client) -> None:
    """Origin: test_get_projects (MindsDB @v26.1.0)."""
    response = client.get("/api/projects", follow_redirects=True)
    all_projects = response.json()
    # Should contain default project.
    assert len(all_projects) == 1
    assert all_projects[0]["name"] == "mindsdb"


def test_get_project(client: httpx.Client) -> None:
    """Origin: test_get_project (MindsDB @v26.1.0)."""
    response = client.get("/api/projects/mindsdb", follow_redirects=True)
    default_project = response.json()
    assert default_project["name"] == "mindsdb"


def test_get_project_not_found(client: httpx.Client) -> None:
    """Origin: test_get_project_not_found (MindsDB @v26.1.0)."""
    response = client.get("/api/projects/zoop", follow_redirects=True)
    assert response.status_code == HTTPStatus.NOT_FOUND
