"""Start-up with a key that does not open the stored secrets: refused, naming the key ids (never a key),
before anything is written; with every key that sealed them (the first one new) it starts."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from agentkb import secrecy
from agentkb.runtime import open_runtime
from tests.conftest import ServedApp
from tests.secret_helpers import fresh_database, stored_json

P = "/api/projects/mindsdb"


async def test_start_up_refuses_a_database_sealed_with_another_key(
    pg_url: str, settings: Any, tmp_path: Path
) -> None:
    first, second = secrecy.generate_key(), secrecy.generate_key()
    first_id, second_id = secrecy.key_id(first), secrecy.key_id(second)
    u = uuid.uuid4().hex[:8]
    with fresh_database(pg_url, f"agentkb_keys_{u}") as url:
        sealed_by_first = settings.model_copy(
            update={"database_url": url, "data_dir": tmp_path, "secret_key": SecretStr(first)}
        )
        with ServedApp(sealed_by_first) as app, httpx.Client(base_url=app.url, timeout=60) as c:
            model = {"provider": "openai", "model_name": "gpt-stub", "api_key": f"sk-keys-{u}"}
            r = c.post(f"{P}/agents", json={"agent": {"name": "agent", "model": model}})
            assert r.status_code == 201, r.text
        before = stored_json(url)
        assert f"enc:v1:{first_id}:" in before

        other = sealed_by_first.model_copy(update={"secret_key": SecretStr(second)})
        with pytest.raises(secrecy.SecretKeyError) as refused:
            async with open_runtime(other, run_worker=False):
                pytest.fail("the runtime opened with a key that does not open the stored secrets")
        message = str(refused.value)
        assert "refusing to start" in message and first_id in message and second_id in message, message
        assert "AGENTKB_ALLOW_UNKNOWN_SECRET_KEYS" in message
        assert first not in message and second not in message and f"sk-keys-{u}" not in message
        assert stored_json(url) == before  # nothing was written

        # the new key first, the old one after it (a rotation in progress): it starts, and reads the secret
        both = sealed_by_first.model_copy(update={"secret_key": SecretStr(f"{second},{first}")})
        async with open_runtime(both, run_worker=False) as services:
            (agent,) = await services.agents.list("mindsdb")
            assert services.box.reveal(agent.model)["api_key"] == f"sk-keys-{u}"
        # and let through on purpose, the one without it starts too
        allowed = other.model_copy(update={"allow_unknown_secret_keys": True})
        async with open_runtime(allowed, run_worker=False):
            pass
