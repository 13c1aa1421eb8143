"""The reranker over each KB model provider (its chat in the provider's wire format, against the scripted
servers of tests/openai_stub.py and tests/provider_stub.py) and MindsDB's scoring `method`s: `multi-class`
and `binary` from log-probabilities, `no-logprobs` from a 0-100 answer; values it cannot apply are 400s."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from agentkb.errors import BadRequest, UpstreamError
from agentkb.guarded_http import guarded_httpx_client
from agentkb.kb import rerank
from agentkb.kb.search import Hit
from tests.openai_stub import OpenAIStub, Scripted
from tests.provider_stub import ProviderStub, sigv4_signature

AK, SK = "AKIDRERANK", "rerank-secret-key"
TEXTS = ["cats purr", "stocks fell", "kittens nap"]


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderStub]:
    with ProviderStub(aws_secrets={AK: SK}) as stub:
        yield stub


@pytest.fixture()
def provider(server: ProviderStub) -> ProviderStub:
    server.reset()
    return server


@pytest.fixture()
def api(stub: OpenAIStub) -> OpenAIStub:
    stub.reset()
    return stub


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def hits() -> list[Hit]:
    return [Hit(i, f"c{i}", text, {}, 0.5, 0.6) for i, text in enumerate(TEXTS)]


async def ranked(model: dict[str, Any], threshold: float | None = None) -> list[tuple[int, float]]:
    async with guarded_httpx_client() as client:
        found = await rerank.rerank(client, model, "small cats", hits(), threshold, 10)
    return [(h.id, round(h.relevance or 0, 4)) for h in found]


SCORES = '{"scores": [0.9, 0.1, 0.7]}'
BEST = [(0, 0.9), (2, 0.7)]  # 0.1 is below the default threshold (0.5)


# --- one request for every candidate (no `method`), over each provider's chat ------------------------


async def test_azure_openai_chat_through_the_deployment(api: OpenAIStub) -> None:
    api.script(Scripted(200, {"choices": [{"message": {"role": "assistant", "content": SCORES}}]}))
    model = {
        "provider": "azure_openai",
        "model_name": "gpt-4o",
        "api_key": "az-rerank",
        "base_url": api.url.removesuffix("/v1"),
        "api_version": "2024-02-01",
    }
    assert await ranked(model) == BEST
    (seen,) = api.requests
    assert (
        seen.path == "/openai/deployments/gpt-4o/chat/completions" and seen.query == "api-version=2024-02-01"
    )
    assert seen.headers["api-key"] == "az-rerank" and "authorization" not in seen.headers
    assert seen.body["temperature"] == 0 and "Passage 3: kittens nap" in seen.body["messages"][0]["content"]


async def test_gemini_generate_content(provider: ProviderStub) -> None:
    provider.script(SCORES)
    model = {
        "provider": "google",
        "model_name": "gemini-2.0-flash",
        "api_key": "g-rr",
        "base_url": provider.url,
    }
    assert await ranked(model) == BEST
    (seen,) = provider.requests
    assert (
        seen.path == "/models/gemini-2.0-flash:generateContent" and seen.headers["x-goog-api-key"] == "g-rr"
    )
    assert seen.json["generationConfig"] == {"temperature": 0}
    (content,) = seen.json["contents"]
    assert content["role"] == "user" and "Query: small cats" in content["parts"][0]["text"]


async def test_bedrock_converse_signed(provider: ProviderStub) -> None:
    provider.script(SCORES)
    model = {
        "provider": "bedrock",
        "model_name": "anthropic.claude-3-haiku-20240307-v1:0",
        "aws_access_key_id": AK,
        "aws_secret_access_key": SK,
        "aws_region": "eu-central-1",
        "base_url": provider.url,
    }
    assert await ranked(model) == BEST
    (seen,) = provider.requests
    assert seen.path == "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
    assert "/eu-central-1/bedrock/aws4_request" in seen.headers["authorization"]
    assert sigv4_signature(seen, SK) == seen.headers["authorization"].rsplit("Signature=", 1)[1]
    assert seen.json["inferenceConfig"] == {"temperature": 0}
    assert seen.json["messages"][0]["role"] == "user" and "text" in seen.json["messages"][0]["content"][0]


async def test_snowflake_cortex_complete(provider: ProviderStub) -> None:
    provider.script(SCORES)
    model = {
        "provider": "snowflake",
        "model_name": "llama3.1-70b",
        "api_key": "jwt-token-1",
        "snowflake_account_id": "acct",
        "base_url": provider.url + "/api/v2",
    }
    assert await ranked(model) == BEST
    (seen,) = provider.requests
    assert seen.path == "/api/v2/cortex/inference:complete"
    assert seen.headers["authorization"] == "Bearer jwt-token-1"
    assert seen.headers["x-snowflake-authorization-token-type"] == "KEYPAIR_JWT"
    assert seen.json["stream"] is False and seen.json["model"] == "llama3.1-70b"


# --- MindsDB's methods -------------------------------------------------------------------------------


def logprob_answer(content: str, tokens: list[tuple[str, float, list[tuple[str, float]]]]) -> Scripted:
    logprobs = [
        {"token": t, "logprob": lp, "top_logprobs": [{"token": a, "logprob": b} for a, b in top]}
        for t, lp, top in tokens
    ]
    return Scripted(
        200,
        {
            "choices": [
                {"message": {"role": "assistant", "content": content}, "logprobs": {"content": logprobs}}
            ]
        },
    )


def stub_model(api: OpenAIStub, method: str) -> dict[str, Any]:
    return {
        "provider": "openai",
        "model_name": "judge",
        "api_key": "sk-j",
        "base_url": api.url,
        "method": method,
    }


def classes(best: str, p: float) -> Scripted:
    """`class_<best>` with probability p, the rest of the mass on class 1."""
    rest = "1" if best != "1" else "2"
    return logprob_answer(
        f"class_{best}",
        [
            ("class", -0.01, []),
            ("_", -0.01, []),
            (best, math.log(p), [(best, math.log(p)), (rest, math.log(1 - p))]),
        ],
    )


async def test_multi_class_scores_from_the_class_tokens_logprobs(api: OpenAIStub) -> None:
    api.script(classes("4", 0.9), classes("1", 0.8), classes("3", 0.6))
    found = dict(await ranked(stub_model(api, "multi-class"), threshold=0.0))
    assert len(api.requests) == 3  # one request per candidate
    for seen in api.requests:
        body = seen.body
        assert body["logprobs"] is True and body["top_logprobs"] == 4 and body["max_completion_tokens"] == 100
        assert body["n"] == 1 and body["temperature"] == 0
        assert body["messages"][0]["role"] == "system" and "class_4" in body["messages"][0]["content"]
        assert "Search query: small cats" in body["messages"][1]["content"]
    # the candidates ran concurrently: map each request's document to the reply it got, in arrival order
    weights = [0.9 * 1.0 + 0.1 * 0.25, 0.8 * 0.25 + 0.2 * 0.5, 0.6 * 0.75 + 0.4 * 0.25]
    documents = [
        s.body["messages"][1]["content"].split("Document chunk: ")[1].split("\n")[0] for s in api.requests
    ]
    assert found == {TEXTS.index(d): round(w, 4) for d, w in zip(documents, weights, strict=True)}


async def test_binary_scores_the_answers_probability(api: OpenAIStub) -> None:
    api.script(
        logprob_answer("yes", [("yes", math.log(0.8), [])]),
        logprob_answer("no", [("no", math.log(0.9), [])]),
        logprob_answer("maybe", [("maybe", math.log(0.5), [])]),
    )
    found = dict(await ranked(stub_model(api, "binary"), threshold=0.0))
    documents = [s.body["messages"][1]["content"].split("Document: ")[1].split("\n")[0] for s in api.requests]
    assert found == {TEXTS.index(d): s for d, s in zip(documents, [0.8, 0.1, 0.25], strict=True)}
    assert all(s.body["max_completion_tokens"] == 1 and s.body["logprobs"] is True for s in api.requests)
    assert "'yes' or 'no'" in api.requests[0].body["messages"][0]["content"]


async def test_no_logprobs_reads_a_percentage_on_any_provider(provider: ProviderStub) -> None:
    provider.script("85", "Score: 30 per cents", "no idea")
    model = {
        "provider": "gemini",
        "model_name": "g",
        "api_key": "k",
        "base_url": provider.url,
        "method": "no-logprobs",
    }
    found = dict(await ranked(model, threshold=0.0))
    documents = [s.json["contents"][0]["parts"][0]["text"] for s in provider.requests]
    assert found == {TEXTS.index(d): s for d, s in zip(documents, [0.85, 0.3, 0.0], strict=True)}
    instruction = provider.requests[0].json["systemInstruction"]["parts"][0]["text"]
    assert instruction.startswith("Score the relevance") and instruction.endswith("Search query: small cats")


async def test_logprob_methods_need_logprobs_in_the_answer(api: OpenAIStub) -> None:
    api.script(Scripted(200, {"choices": [{"message": {"role": "assistant", "content": "class_4"}}]}))
    with pytest.raises(UpstreamError, match="needs log-probabilities"):
        await ranked(stub_model(api, "multi-class"))


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            {"provider": "openai", "model_name": "m", "method": "listwise"},
            "'reranking_model.method' 'listwise' is not",
        ),
        (
            {"provider": "google", "model_name": "m", "api_key": "k", "method": "binary"},
            "reads log-probabilities",
        ),
        ({"provider": "bedrock", "model_name": "m", "method": "multi-class"}, "reads log-probabilities"),
        ({"provider": "cohere", "model_name": "m"}, "'reranking_model.provider' 'cohere' is not supported"),
        (
            {"provider": "azure_openai", "model_name": "m", "base_url": "https://r.openai.azure.com"},
            "api_version",
        ),
        (
            {"provider": "snowflake", "model_name": "m", "api_key": "k"},
            "'reranking_model.account_id' is required",
        ),
    ],
)
def test_models_it_cannot_call_are_bad_requests(model: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        rerank.check_model(model)


async def test_a_failing_provider_is_an_upstream_error(provider: ProviderStub) -> None:
    provider.script((429, {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}))
    with pytest.raises(UpstreamError, match="HTTP 429"):
        await ranked({"provider": "google", "model_name": "g", "api_key": "k", "base_url": provider.url})
