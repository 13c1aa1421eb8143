"""`credentials.llm_config`: which key and base URL an agent's LLM call uses (MindsDB's spellings), and that
a key only ever goes to the server given with it."""

from __future__ import annotations

import pytest

from agentkb.credentials import llm_config, openai_env_key
from agentkb.errors import BadRequest
from agentkb.secrecy import MASK

OPENAI = {"provider": "openai", "model_name": "gpt-4o"}


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-server")
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)


def test_flat_params_reach_the_model() -> None:
    """CREATE AGENT ... USING provider='openai', model='gpt-4o', openai_api_key=..., base_url=... (25.14)."""
    config = llm_config(OPENAI, {"openai_api_key": "-key-", "base_url": "http://llm.local/v1", "timeout": 9})
    assert config == {**OPENAI, "api_key": "-key-", "base_url": "http://llm.local/v1"}
    rest = llm_config(
        OPENAI, {"api_key": "sk-test", "openai_api_base": "http://other/v1", "temperature": 0.2}
    )
    assert rest == {**OPENAI, "api_key": "sk-test", "base_url": "http://other/v1", "temperature": 0.2}


def test_the_model_object_wins_and_credentials_never_mix() -> None:
    model = {**OPENAI, "api_key": "sk-model"}
    # the agent's model object and its flat params are one layer (the agent's own settings), the object first
    assert llm_config(model, {"api_key": "sk-flat", "base_url": "http://x/v1"}) == {
        **model,
        "base_url": "http://x/v1",
    }
    # a key given without a base URL goes to the provider's own endpoint, never to another layer's server
    default = {**OPENAI, "api_key": "sk-default", "base_url": "http://proxy/v1", "api_version": "1"}
    assert llm_config(model, None, default) == {**model, "api_version": "1"}


def test_default_model_only_for_its_provider_and_server() -> None:
    default = {**OPENAI, "api_key": "sk-default", "base_url": "http://stub/v1", "method": "m"}
    assert llm_config({"provider": "openai", "model_name": "gpt-4o-mini"}, {}, default) == {
        "provider": "openai",
        "model_name": "gpt-4o-mini",
        "method": "m",
        "api_key": "sk-default",
        "base_url": "http://stub/v1",
    }
    # another base URL: neither the default's key nor the server's OPENAI_API_KEY goes there
    other = llm_config(OPENAI, {"base_url": "http://localhost:9/v1"}, default)
    assert other["base_url"] == "http://localhost:9/v1" and "api_key" not in other
    # another provider: MindsDB 26.1 ignores the default
    claude = llm_config({"provider": "anthropic", "model_name": "claude-x"}, {}, default)
    assert claude == {"provider": "anthropic", "model_name": "claude-x", "api_key": "sk-ant-server"}


def test_server_key_only_for_the_providers_own_host() -> None:
    assert llm_config(OPENAI)["api_key"] == "sk-server"
    assert llm_config(OPENAI, {"base_url": "https://api.openai.com/v1"})["api_key"] == "sk-server"
    for url in (
        "http://127.0.0.1:1/v1",
        "https://evil.example/api.openai.com/v1",
        "https://api.openai.com.evil/v1",
    ):
        assert "api_key" not in llm_config(OPENAI, {"base_url": url}), url
        assert openai_env_key(url) is None
    assert "api_key" not in llm_config({"provider": "anthropic", "model_name": "c"}, {"base_url": "http://x"})
    assert "api_key" not in llm_config({"provider": "ollama", "model_name": "llama3"})


def test_a_key_of_one_provider_is_not_given_to_another() -> None:
    claude = {"provider": "anthropic", "model_name": "claude-x"}
    assert llm_config(claude, {"openai_api_key": "sk-user"})["api_key"] == "sk-ant-server"
    assert llm_config(claude, {"anthropic_api_key": "sk-ant-user"})["api_key"] == "sk-ant-user"
    assert llm_config(claude, {"anthropic_api_url": "http://a/"})["base_url"] == "http://a/"
    assert llm_config({"provider": "ollama", "model_name": "m"}, {"ollama_base_url": "http://o/v1"}) == {
        "provider": "ollama",
        "model_name": "m",
        "base_url": "http://o/v1",
    }
    org = llm_config(OPENAI, {"api_key": "k", "api_organization": "org-1"})
    assert org["organization"] == "org-1"


def test_per_query_override() -> None:
    agent = {**OPENAI, "api_key": "sk-agent", "base_url": "http://mine/v1"}
    same = llm_config(agent, None, None, {"model_name": "gpt-4o-mini", "temperature": 0})
    assert same == {**agent, "model_name": "gpt-4o-mini", "temperature": 0}
    # another server: the agent's key stays with the agent's server; the query must give its own key
    for given in ({"base_url": "http://elsewhere/v1"}, {"base_url": "http://elsewhere/v1", "api_key": MASK}):
        with pytest.raises(BadRequest, match="'model.api_key' again"):
            llm_config(agent, None, None, given)
    moved = llm_config(agent, None, None, {"base_url": "http://elsewhere/v1", "api_key": "sk-q"})
    assert (moved["base_url"], moved["api_key"]) == ("http://elsewhere/v1", "sk-q")
    # the agent's own server named again (`******` gives nothing): the agent's key
    same_server = llm_config(agent, None, None, {"base_url": "http://mine/v1/", "api_key": MASK})
    assert same_server["api_key"] == "sk-agent"
    # another provider: nothing of the agent's model is reused
    other = llm_config(agent, None, None, {"provider": "anthropic", "model_name": "claude-x"})
    assert other == {"provider": "anthropic", "model_name": "claude-x", "api_key": "sk-ant-server"}
