"""Knowledge bases over the providers beside OpenAI, through the HTTP API: Bedrock embeddings with a Gemini
reranker, Snowflake embeddings (key-pair JWT) with an Azure OpenAI reranker (`method = 'multi-class'`),
against scripted servers on 127.0.0.1; their secrets masked in records, sealed at rest, bound to their
endpoints; models the server cannot call refused when the KB is created."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from agentkb import secrecy
from tests.helpers import assert_problem
from tests.openai_stub import OpenAIStub, Scripted
from tests.provider_stub import ProviderStub
from tests.secret_helpers import stored_json

P = "/api/projects/mindsdb"
AK, SK, TOKEN = "AKIDKBTEST000001", "kb-aws-secret-value", "kb-aws-session-token"
ROWS = [
    {"id": 1, "content": "Cheetahs are the fastest land animals."},
    {"id": 2, "content": "The stock market fell on Tuesday."},
    {"id": 3, "content": "Leopards climb trees to rest."},
]


@pytest.fixture(scope="module")
def provider() -> Iterator[ProviderStub]:
    with ProviderStub(aws_secrets={AK: SK}) as stub:
        yield stub


def create(client: httpx.Client, name: str, **fields: Any) -> dict[str, Any]:
    r = client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": name, **fields}})
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def insert_and_search(client: httpx.Client, kb: str, query: str) -> list[dict[str, Any]]:
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": ROWS}})
    assert r.status_code == 200, r.text
    r = client.post(f"{P}/knowledge_bases/{kb}/search", json={"query": query, "limit": 3})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_secret_names_of_the_new_providers() -> None:
    for name in ("aws_access_key_id", "aws_secret_access_key", "aws_session_token", "private_key", "api_key"):
        assert secrecy.is_secret_key(name), name
    for name in ("aws_region_name", "account_id", "api_version", "deployment", "user"):
        assert not secrecy.is_secret_key(name), name


def test_bedrock_embeddings_with_a_gemini_reranker(
    client: httpx.Client, unique: str, provider: ProviderStub, pg_url: str
) -> None:
    kb = f"bedrock_{unique}"
    embedding = {
        "provider": "bedrock",
        "model_name": "amazon.titan-embed-text-v2:0",
        "aws_access_key_id": AK,
        "aws_secret_access_key": SK,
        "aws_session_token": TOKEN,
        "aws_region_name": "us-east-1",
        "endpoint_url": provider.url,
        "dimensions": 8,
    }
    reranker = {
        "provider": "google",
        "model_name": "gemini-2.0-flash",
        "api_key": f"g-{unique}",
        "base_url": provider.url,
    }
    provider.reset()
    record = create(client, kb, embedding_model=embedding, reranking_model=reranker)
    assert record["embedding_model"] == {
        **embedding,
        "aws_access_key_id": "******",
        "aws_secret_access_key": "******",
        "aws_session_token": "******",
    }
    assert record["reranking_model"]["api_key"] == "******"
    stored = stored_json(pg_url)
    assert all(secret not in stored for secret in (AK, SK, TOKEN, f"g-{unique}"))  # sealed at rest

    provider.answer = '{"scores": [0.9, 0.2, 0.8]}'
    try:
        hits = insert_and_search(client, kb, "fast cats")
    finally:
        provider.answer = "stub answer"
    assert len(hits) == 2 and [h["relevance"] for h in hits] == [0.9, 0.8]
    invokes = [s for s in provider.requests if s.path.endswith("/invoke")]
    assert {s.json["inputText"] for s in invokes} >= {r["content"] for r in ROWS} | {"fast cats"}
    assert all(s.headers["x-amz-security-token"] == TOKEN for s in invokes)
    (judge,) = [s for s in provider.requests if s.path.endswith(":generateContent")]
    assert judge.headers["x-goog-api-key"] == f"g-{unique}" and "authorization" not in judge.headers

    # the region names AWS's endpoint: moving it keeps no stored key (MindsDB's ALTER merges the model)
    moved = {"embedding_model": {"aws_region_name": "eu-west-1"}}
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"params": moved}})
    problem = assert_problem(r, 400)
    assert "'embedding_model.aws_region_name' changed" in problem["detail"]
    assert "aws_secret_access_key" in problem["detail"]


def test_snowflake_embeddings_with_an_azure_multi_class_reranker(
    client: httpx.Client, unique: str, provider: ProviderStub, stub: OpenAIStub, pg_url: str
) -> None:
    pem = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        .decode()
    )
    kb = f"snow_{unique}"
    embedding = {
        "provider": "snowflake",
        "model_name": "snowflake-arctic-embed-m-v1.5",
        "account_id": "myorg-acct",
        "user": "kb_user",
        "private_key": pem,
        "base_url": provider.url + "/api/v2",
    }
    reranker = {
        "provider": "azure_openai",
        "model_name": "gpt-4o",
        "api_key": f"az-{unique}",
        "base_url": stub.url.removesuffix("/v1"),
        "api_version": "2024-02-01",
        "method": "multi-class",
    }
    provider.reset()
    record = create(client, kb, embedding_model=embedding, reranking_model=reranker)
    assert (
        record["embedding_model"]["private_key"] == "******"
        and record["reranking_model"]["api_key"] == "******"
    )
    assert pem.splitlines()[1] not in stored_json(pg_url) and f"az-{unique}" not in stored_json(pg_url)

    def classified(body: dict[str, Any]) -> Scripted:
        best = "4" if "Cheetahs" in body["messages"][1]["content"] else "1"
        top = [{"token": best, "logprob": 0.0}]
        logprobs = {"content": [{"token": best, "logprob": 0.0, "top_logprobs": top}]}
        return Scripted(200, {"choices": [{"message": {"content": f"class_{best}"}, "logprobs": logprobs}]})

    stub.reset()
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": ROWS}})
    assert r.status_code == 200, r.text
    stub.chat_script = classified  # each candidate's request answered by its own document
    try:
        hits = _search(client, kb)
    finally:
        stub.chat_script = None
    assert [(h["id"], h["relevance"]) for h in hits] == [(1, 1.0)]  # class_1 (0.25) is below 0.5
    assert len(stub.requests) == 3  # one request per candidate
    for seen in stub.requests:
        assert (
            seen.path == "/openai/deployments/gpt-4o/chat/completions"
            and seen.query == "api-version=2024-02-01"
        )
        assert seen.headers["api-key"] == f"az-{unique}" and seen.body["logprobs"] is True
    embeds = [s for s in provider.requests if s.path.endswith(":embed")]
    assert embeds and all(s.headers["x-snowflake-authorization-token-type"] == "KEYPAIR_JWT" for s in embeds)


def _search(client: httpx.Client, kb: str, **more: Any) -> list[dict[str, Any]]:
    r = client.post(f"{P}/knowledge_bases/{kb}/search", json={"query": "fast cats", "limit": 3, **more})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"reranking_model": {"provider": "openai", "model_name": "m", "method": "pairwise"}},
            "'pairwise' is not supported",
        ),
        (
            {
                "reranking_model": {
                    "provider": "google",
                    "model_name": "m",
                    "api_key": "k",
                    "method": "multi-class",
                }
            },
            "reads log-probabilities",
        ),
        ({"embedding_model": {"provider": "bedrock", "model_name": "m", "dimensions": 8}}, "aws_region_name"),
        (
            {
                "embedding_model": {
                    "provider": "azure_openai",
                    "model_name": "m",
                    "base_url": "http://169.254.169.254",
                }
            },
            "link-local",
        ),
    ],
)
def test_models_it_cannot_call_are_refused_at_create(
    client: httpx.Client, unique: str, fields: dict[str, Any], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    r = client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": f"refused_{unique}", **fields}})
    assert message in assert_problem(r, 400)["detail"]
