"""Fixtures of the KB tests that run a second server beside the session's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import ServedApp


@pytest.fixture()
def second(settings: Any) -> Iterator[httpx.Client]:
    """Server B: its own app, services and caches, on the session's database."""
    own = settings.model_copy(update={"worker_enabled": False})
    with ServedApp(own) as app, httpx.Client(base_url=app.url, timeout=60) as client:
        yield client
