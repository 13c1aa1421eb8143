"""The KB model providers beside OpenAI (MindsDB's names and parameters), each against a scripted server
speaking its wire format on 127.0.0.1: Azure OpenAI (tests/openai_stub.py, under Azure's paths), the
Gemini API, Amazon Bedrock (SigV4 verified as AWS does) and Snowflake Cortex (tests/provider_stub.py).
Embedders and the reranker's chat; the exact request each server receives; keys only where they belong."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import orjson
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from agentkb.errors import BadRequest, UpstreamError
from agentkb.kb.apis import aws, snowflake
from agentkb.kb.embedders.registry import EmbedderRegistry
from agentkb.kb.model_endpoints import endpoints
from tests.openai_stub import OpenAIStub, stub_vector
from tests.provider_stub import ProviderStub, Seen, sigv4_signature

AK, SK, TOKEN = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token-1"
PROVIDER_ENV = (
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_OPENAI_API_VERSION",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
)


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


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


def root(stub: OpenAIStub) -> str:
    return stub.url.removesuffix("/v1")


def expected(texts: list[str], dim: int = 8) -> np.ndarray:
    rows = np.asarray([stub_vector(t, dim) for t in texts], dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


async def embed(config: dict[str, Any], texts: list[str]) -> np.ndarray:
    registry = EmbedderRegistry()
    try:
        return await registry.get(config).embed_documents(texts)
    finally:
        await registry.aclose()


# --- AWS SigV4: the signer (botocore) and the stub's verifier, on AWS's published test suite ------------

SUITE = [  # (method, url, signature) from AWS's SigV4 test suite, signed 2015-08-30T12:36:00Z
    (
        "GET",
        "https://example.amazonaws.com/",
        "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    ),
    (
        "POST",
        "https://example.amazonaws.com/",
        "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
    ),
    (
        "GET",
        "https://example.amazonaws.com/?Param2=value2&Param1=value1",
        "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
    ),
]


@pytest.mark.parametrize(("method", "url", "signature"), SUITE)
def test_sigv4_signs_and_verifies_aws_test_vectors(
    monkeypatch: pytest.MonkeyPatch, method: str, url: str, signature: str
) -> None:
    import botocore.auth

    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: dt.datetime(2015, 8, 30, 12, 36))
    headers = aws.sign(method, url, {}, b"", aws.AWSKeys(AK, SK), "us-east-1", "service")
    assert headers["X-Amz-Date"] == "20150830T123600Z"
    assert headers["Authorization"] == (
        f"AWS4-HMAC-SHA256 Credential={AK}/20150830/us-east-1/service/aws4_request, "
        f"SignedHeaders=host;x-amz-date, Signature={signature}"
    )
    path, _, query = url.removeprefix("https://example.amazonaws.com").partition("?")
    lower = {k.lower(): v for k, v in headers.items()} | {"host": "example.amazonaws.com"}
    assert sigv4_signature(Seen(method, path, query, lower, b""), SK) == signature


# --- Azure OpenAI ------------------------------------------------------------------------------------


async def test_azure_embeds_through_its_deployment_with_the_api_key_header(api: OpenAIStub) -> None:
    config = {
        "provider": "azure_openai",
        "model_name": "text-embedding-3-small",
        "deployment": "emb-deploy",
        "api_key": "az-key-1",
        "base_url": root(api) + "/",
        "api_version": "2024-02-01",
        "dimensions": 8,
    }
    vectors = await embed(config, ["one", "two"])
    assert np.allclose(vectors, expected(["one", "two"]), atol=1e-6)
    (seen,) = api.requests
    assert seen.path == "/openai/deployments/emb-deploy/embeddings" and seen.query == "api-version=2024-02-01"
    assert seen.headers["api-key"] == "az-key-1" and "authorization" not in seen.headers
    assert seen.body == {
        "model": "text-embedding-3-small",
        "input": ["one", "two"],
        "dimensions": 8,
        "encoding_format": "base64",
    }


async def test_azure_environment_key_goes_only_to_the_environment_endpoint(
    api: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "env-az-key")
    monkeypatch.setenv("AZURE_OPENAI_API_VERSION", "2024-06-01")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", root(api))
    await embed({"provider": "azure_openai", "model_name": "emb"}, ["x"])  # all from the environment
    assert (
        api.requests[-1].headers["api-key"] == "env-az-key"
        and api.requests[-1].query == "api-version=2024-06-01"
    )
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://elsewhere.openai.azure.com")
    await embed({"provider": "openai_azure", "model_name": "emb", "base_url": root(api)}, ["y"])
    assert "api-key" not in api.requests[-1].headers  # the environment's key is for another endpoint
    monkeypatch.delenv("AZURE_OPENAI_API_VERSION")
    with pytest.raises(BadRequest, match=r"'embedding_model.api_version' is required"):
        await embed({"provider": "azure_openai", "model_name": "emb", "base_url": root(api)}, ["z"])


# --- Gemini ------------------------------------------------------------------------------------------


async def test_gemini_batch_embeds_with_the_goog_api_key(provider: ProviderStub) -> None:
    config = {
        "provider": "google",
        "model_name": "text-embedding-004",
        "api_key": "g-key-1",
        "base_url": provider.url + "/v1beta",
        "dimensions": 8,
        "batch_size": 2,
    }
    texts = ["alpha", "beta", "gamma"]
    assert np.allclose(await embed(config, texts), expected(texts), atol=1e-6)
    first, second = sorted(provider.requests, key=lambda s: len(s.json["requests"]), reverse=True)
    assert first.method == "POST" and first.path == "/v1beta/models/text-embedding-004:batchEmbedContents"
    assert first.headers["x-goog-api-key"] == "g-key-1" and "authorization" not in first.headers
    assert first.json["requests"][0] == {
        "model": "models/text-embedding-004",
        "outputDimensionality": 8,
        "content": {"parts": [{"text": "alpha"}]},
    }
    assert len(second.json["requests"]) == 1


async def test_gemini_environment_key_only_for_googles_host(
    provider: ProviderStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "server-gemini-key")
    with pytest.raises(BadRequest, match=r"'embedding_model.api_key' is required for provider google"):
        await embed({"provider": "gemini", "model_name": "m", "base_url": provider.url}, ["x"])
    assert provider.requests == []


# --- Bedrock -----------------------------------------------------------------------------------------


def bedrock(provider: ProviderStub, model: str, **more: Any) -> dict[str, Any]:
    return {
        "provider": "bedrock",
        "model_name": model,
        "aws_access_key_id": AK,
        "aws_secret_access_key": SK,
        "aws_region_name": "us-west-2",
        "base_url": provider.url,
        **more,
    }


async def test_bedrock_titan_one_signed_request_per_text(provider: ProviderStub) -> None:
    config = bedrock(provider, "amazon.titan-embed-text-v2:0", aws_session_token=TOKEN, dimensions=8)
    texts = ["first text", "second text"]
    assert np.allclose(await embed(config, texts), expected(texts), atol=1e-6)
    assert len(provider.requests) == 2
    for seen in provider.requests:
        assert seen.path == "/model/amazon.titan-embed-text-v2%3A0/invoke"  # the id's `:` encoded, as signed
        assert seen.json["inputText"] in texts and seen.json["dimensions"] == 8
        authorization = seen.headers["authorization"]
        assert authorization.startswith(f"AWS4-HMAC-SHA256 Credential={AK}/")
        assert "/us-west-2/bedrock/aws4_request, " in authorization
        assert seen.headers["x-amz-security-token"] == TOKEN
        assert SK not in orjson.dumps(seen.headers).decode()  # the secret signs; it is never sent
        assert sigv4_signature(seen, SK) == authorization.rsplit("Signature=", 1)[1]


async def test_bedrock_cohere_batches_and_a_bad_signature_is_refused(provider: ProviderStub) -> None:
    texts = ["a", "b", "c"]
    vectors = await embed(bedrock(provider, "cohere.embed-english-v3", batch_size=2), texts)
    assert np.allclose(vectors, expected(texts), atol=1e-6)
    assert sorted((s.json for s in provider.requests), key=lambda b: len(b["texts"]), reverse=True) == [
        {"texts": ["a", "b"], "input_type": "search_document"},
        {"texts": ["c"], "input_type": "search_document"},
    ]
    await embed(bedrock(provider, "us.cohere.embed-v4:0"), ["v4"])
    assert provider.requests[-1].json == {
        "texts": ["v4"],
        "input_type": "search_document",
        "embedding_types": ["float"],
    }
    wrong = bedrock(provider, "amazon.titan-embed-text-v1", aws_secret_access_key="not-the-secret")
    with pytest.raises(UpstreamError, match="HTTP 403: The request signature we calculated does not match"):
        await embed(wrong, ["x"])


async def test_bedrock_environment_credentials_only_for_aws(
    provider: ProviderStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AK)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SK)
    config = {"provider": "bedrock", "model_name": "amazon.titan-embed-text-v1", "aws_region": "us-east-1"}
    with pytest.raises(BadRequest, match=r"'embedding_model.aws_access_key_id' is required"):
        await embed({**config, "endpoint_url": provider.url}, ["x"])
    assert provider.requests == []
    for region in ("us-east-1/../x", "169.254.169.254"):
        with pytest.raises(BadRequest, match="is not an AWS region"):
            await embed({**bedrock(provider, "m"), "aws_region_name": region}, ["x"])


# --- Snowflake ---------------------------------------------------------------------------------------


def snowflake_model(provider: ProviderStub, **more: Any) -> dict[str, Any]:
    return {
        "provider": "snowflake",
        "model_name": "snowflake-arctic-embed-m-v1.5",
        "account_id": "myorg-acct",
        "base_url": provider.url + "/api/v2",
        **more,
    }


async def test_snowflake_embeds_with_a_programmatic_access_token(provider: ProviderStub) -> None:
    texts = ["x1", "x2", "x3"]
    vectors = await embed(snowflake_model(provider, api_key="pat/pat-secret-1"), texts)
    assert np.allclose(vectors, expected(texts), atol=1e-6)  # answered in reverse: `index` restores the order
    (seen,) = provider.requests
    assert seen.path == "/api/v2/cortex/inference:embed"
    assert seen.json == {"text": texts, "model": "snowflake-arctic-embed-m-v1.5"}
    assert seen.headers["authorization"] == "Bearer pat-secret-1"
    assert seen.headers["x-snowflake-authorization-token-type"] == "PROGRAMMATIC_ACCESS_TOKEN"


async def test_snowflake_key_pair_jwt_made_from_the_private_key(provider: ProviderStub) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    await embed(
        snowflake_model(provider, private_key=pem, user="kb_user", account_id="myorg-acct.us-east-1"), ["t"]
    )
    (seen,) = provider.requests
    assert seen.headers["x-snowflake-authorization-token-type"] == "KEYPAIR_JWT"
    token = seen.headers["authorization"].removeprefix("Bearer ")
    header, claims, signature = token.split(".")
    pad = lambda part: base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))  # noqa: E731
    key.public_key().verify(
        pad(signature), f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256()
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    fingerprint = "SHA256:" + base64.b64encode(hashlib.sha256(public).digest()).decode()
    body = orjson.loads(pad(claims))
    assert body["sub"] == "MYORG-ACCT.KB_USER" and body["iss"] == f"MYORG-ACCT.KB_USER.{fingerprint}"
    assert body["exp"] - body["iat"] == snowflake.JWT_LIFETIME
    with pytest.raises(BadRequest, match="is not a Snowflake account identifier"):
        await embed(snowflake_model(provider, api_key="k", account_id="x@169.254.169.254#"), ["t"])


# --- where each model's requests (and keys) go -------------------------------------------------------


def test_model_endpoints_name_each_providers_server(monkeypatch: pytest.MonkeyPatch) -> None:
    found = endpoints(
        {
            "embedding_model": {"provider": "bedrock", "model_name": "m", "aws_region_name": "eu-west-1"},
            "reranking_model": {"provider": "google", "model_name": "gemini-2.0-flash"},
        }
    )
    assert found == {
        "embedding_model": "https://bedrock-runtime.eu-west-1.amazonaws.com",
        "reranking_model": "https://generativelanguage.googleapis.com/v1beta",
    }
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com/")
    assert endpoints(
        {
            "embedding_model": {"provider": "snowflake", "model_name": "m", "account_id": "OrgA-Acct"},
            "reranking_model": {"provider": "azure_openai", "model_name": "gpt-4o"},
        }
    ) == {
        "embedding_model": "https://orga-acct.snowflakecomputing.com/api/v2",
        "reranking_model": "https://res.openai.azure.com/",
    }
