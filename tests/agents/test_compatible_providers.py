"""MindsDB's other agent providers, OpenAI-compatible servers under other names (`vllm`, `nvidia_nim`,
`litellm`, `writer`): MindsDB's parameter spellings and defaults, each run against the scripted OpenAI stub,
keys only to the server given with them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest

from agentkb.agents.providers import PROVIDERS, ProviderContext
from agentkb.service.catalog.agent_input import PROVIDERS as ACCEPTED
from tests.helpers import create_agent
from tests.openai_stub import OpenAIStub, text

P = "/api/projects/mindsdb"


@pytest.fixture()
def llm(stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIStub]:
    for name in ("OPENAI_API_KEY", "NVIDIA_NIM_API_KEY", "LITELLM_API_KEY", "WRITER_API_KEY"):
        monkeypatch.setenv(name, f"server-{name}")  # none of them is for the stub's server
    stub.reset()
    yield stub


def answer(client: httpx.Client, agent: str, model: dict[str, Any], stub: OpenAIStub) -> dict[str, str]:
    """Create the agent, ask it once; the headers of the one chat request the stub received."""
    create_agent(client, agent, model=model)
    stub.script(text(f"{model['provider']} answers"))
    r = client.post(f"{P}/agents/{agent}/completions", json={"messages": [{"question": "hi", "answer": ""}]})
    assert r.status_code == 200, r.text
    assert r.json()["message"]["content"] == f"{model['provider']} answers"
    (seen,) = stub.requests
    assert seen.path == "/v1/chat/completions" and seen.body["model"] == model["model_name"]
    return seen.headers


@pytest.mark.parametrize(
    ("provider", "spelling", "key", "sent"),
    [
        ("vllm", {"openai_api_base": "{url}"}, {}, "Bearer EMPTY"),  # MindsDB's key for keyless vLLM
        ("vllm", {"base_url": "{url}"}, {"openai_api_key": "vllm-key"}, "Bearer vllm-key"),
        ("nvidia_nim", {"nvidia_nim_base_url": "{url}"}, {"nvidia_nim_api_key": "nim-key"}, "Bearer nim-key"),
        ("litellm", {"litellm_api_base": "{url}"}, {"api_key": "lite-key"}, "Bearer lite-key"),
        ("writer", {"base_url": "{url}"}, {"writer_api_key": "writer-key"}, "Bearer writer-key"),
    ],
)
def test_openai_compatible_providers_under_mindsdbs_names(
    client: httpx.Client,
    unique: str,
    llm: OpenAIStub,
    provider: str,
    spelling: dict[str, str],
    key: dict[str, str],
    sent: str,
) -> None:
    model = {"provider": provider, "model_name": f"{provider}-model", **key}
    model.update({k: v.format(url=llm.url) for k, v in spelling.items()})
    headers = answer(client, f"{provider}_{len(key)}_{unique}", model, llm)
    assert headers["authorization"] == sent  # never the environment's key: it is for the default server


def test_writer_without_a_key_for_its_server_is_an_authentication_error(
    client: httpx.Client, unique: str, llm: OpenAIStub
) -> None:
    agent = f"writer_nokey_{unique}"
    create_agent(client, agent, model={"provider": "writer", "model_name": "palmyra-x5", "base_url": llm.url})
    r = client.post(
        f"{P}/agents/{agent}/completions/stream", json={"messages": [{"question": "hi", "answer": ""}]}
    )
    error = next(
        c for c in (line.removeprefix("data: ") for line in r.text.split("\n\n")) if '"error_type"' in c
    )
    assert '"authentication"' in error and "WRITER_API_KEY" in error
    assert llm.requests == []


@pytest.mark.parametrize(
    ("provider", "base_url", "key"),
    [
        ("vllm", "http://127.0.0.1:8000/v1", "EMPTY"),
        ("nvidia_nim", "http://127.0.0.1:8000/v1", "api-key-not-set"),
        ("litellm", "http://127.0.0.1:4000", "api-key-not-set"),
        ("writer", "https://api.writer.com/v1", "w-key"),
    ],
)
async def test_default_servers(provider: str, base_url: str, key: str) -> None:
    model = {"provider": provider, "model_name": "m", **({"api_key": key} if provider == "writer" else {})}
    async with httpx2.AsyncClient() as http:
        built = PROVIDERS[provider](ProviderContext(model=model, http_client=http))
        client = built.client  # type: ignore[attr-defined]
        assert str(client.base_url).rstrip("/") == base_url and client.api_key == key


def test_agents_accept_every_registered_provider() -> None:
    assert set(ACCEPTED) == set(PROVIDERS)
