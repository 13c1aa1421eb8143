"""One chat request to a KB's reranking model, in its provider's wire format, over the guarded httpx
client: OpenAI's Chat Completions (OpenAI, Ollama and other compatible servers, Azure OpenAI's
deployments), Gemini's `generateContent`, Bedrock's `Converse` (SigV4-signed) and Snowflake Cortex's
`inference:complete`. The answer's text, and for Chat Completions the tokens' log-probabilities when they
were asked for (`extra = {"logprobs": True, ...}`: the reranker's `multi-class` and `binary` methods)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from agentkb.credentials import openai_env_key
from agentkb.kb.apis import aws, azure, gemini, names, snowflake

if TYPE_CHECKING:
    import httpx

FIELD = "reranking_model"
# providers that speak Chat Completions, whose answers can carry log-probabilities
CHAT_COMPLETIONS = frozenset({names.OPENAI, names.OLLAMA, names.AZURE})


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()  # the most likely tokens at this place, with their logprobs


@dataclass(frozen=True, slots=True)
class ChatAnswer:
    content: str
    logprobs: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True, slots=True)
class ChatRequest:
    url: str
    headers: dict[str, str]
    body: bytes
    provider: str


def _split(messages: list[dict[str, str]]) -> tuple[str, list[dict[str, str]]]:
    """The system messages' text, and the other messages."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    return system, [m for m in messages if m["role"] != "system"]


def request(
    model: Mapping[str, Any], messages: list[dict[str, str]], extra: Mapping[str, Any] | None = None
) -> ChatRequest:
    """The HTTP request asking `model` (a `reranking_model`) to answer `messages` at temperature 0; `extra`:
    more Chat Completions parameters (other providers take none)."""
    provider = names.canonical(model.get("provider") or names.OPENAI, FIELD)
    name = str(model.get("model_name") or "")
    json = {"Content-Type": "application/json"}
    if provider in (names.OPENAI, names.OLLAMA, names.AZURE):
        body = orjson.dumps({"model": name, "messages": messages, "temperature": 0, **(extra or {})})
        if provider == names.AZURE:
            deployment = azure.deployment(model, FIELD)
            return ChatRequest(
                deployment.url("chat/completions"), {**json, **deployment.headers()}, body, provider
            )
        default = names.OLLAMA_BASE_URL if provider == names.OLLAMA else names.OPENAI_BASE_URL
        base_url = names.http_url(str(model.get("base_url") or default), FIELD)
        key = model.get("api_key") or openai_env_key(base_url)
        headers = {**json, "Authorization": f"Bearer {key}"} if key else json
        return ChatRequest(f"{base_url}/chat/completions", headers, body, provider)
    system, rest = _split(messages)
    if provider == names.GEMINI:
        api = gemini.api(model, FIELD)
        payload: dict[str, Any] = {
            "contents": [
                {"role": "user" if m["role"] == "user" else "model", "parts": [{"text": m["content"]}]}
                for m in rest
            ],
            "generationConfig": {"temperature": 0},
        }
        if system:
            payload["systemInstruction"] = {"parts": [{"text": system}]}
        return ChatRequest(
            api.url(name, "generateContent"), {**json, **api.headers()}, orjson.dumps(payload), provider
        )
    if provider == names.BEDROCK:
        bedrock = aws.api(model, FIELD)
        url = bedrock.url(name, "converse")
        payload = {
            "messages": [{"role": m["role"], "content": [{"text": m["content"]}]} for m in rest],
            "inferenceConfig": {"temperature": 0},
        }
        if system:
            payload["system"] = [{"text": system}]
        body = orjson.dumps(payload)
        return ChatRequest(url, bedrock.headers(url, body), body, provider)
    cortex = snowflake.api(model, FIELD)
    body = orjson.dumps({"model": name, "messages": messages, "stream": False, "temperature": 0})
    return ChatRequest(cortex.url("complete"), cortex.headers(), body, provider)


def _logprobs(choice: Mapping[str, Any]) -> tuple[TokenLogprob, ...] | None:
    content = (choice.get("logprobs") or {}).get("content")
    if not isinstance(content, list):
        return None
    return tuple(
        TokenLogprob(
            str(item["token"]),
            float(item["logprob"]),
            tuple((str(t["token"]), float(t["logprob"])) for t in item.get("top_logprobs") or ()),
        )
        for item in content
    )


def answer(provider: str, body: Any) -> ChatAnswer:
    """The answer of a successful response's JSON (KeyError, IndexError, TypeError, ValueError if malformed)."""
    if provider == names.GEMINI:
        parts = body["candidates"][0]["content"]["parts"]
        return ChatAnswer("".join(str(p.get("text", "")) for p in parts))
    if provider == names.BEDROCK:
        return ChatAnswer(str(body["output"]["message"]["content"][0]["text"]))
    choice = body["choices"][0]
    content = choice["message"]["content"]
    return ChatAnswer("" if content is None else str(content), _logprobs(choice))


async def complete(
    client: httpx.AsyncClient,
    model: Mapping[str, Any],
    messages: list[dict[str, str]],
    extra: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
) -> ChatAnswer:
    """`model`'s answer to `messages` (httpx errors, HTTP errors as `httpx.HTTPStatusError`, and a
    malformed answer as KeyError / IndexError / TypeError / ValueError, for the caller to report)."""
    import httpx  # the client's own library, imported by whoever made `client`

    sent = request(model, messages, extra)
    response = await client.post(
        httpx.URL(sent.url), content=sent.body, headers=sent.headers, timeout=timeout
    )
    response.raise_for_status()
    return answer(sent.provider, response.json())
