"""Property-based run of every operation in /openapi.json against the served app: no 5xx, ever."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error


@pytest.fixture(scope="session")
def api_schema(base_url: str) -> Any:
    loaded = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    loaded.config.generation.update(modes=list(schemathesis.GenerationMode))  # valid and invalid inputs
    return loaded


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case: Any) -> None:
    case.call_and_validate(checks=[not_a_server_error])
