"""Reranking search hits with an LLM, MindsDB-style, over any provider `kb/chat.py` speaks.

Used when a knowledge base has a `reranking_model` ({provider, model_name, api_key?, base_url?,
filtering_threshold?, method?, ...}) and the query does not say `reranking = false`. Each candidate gets a
score from 0 to 1; that score becomes the hit's `relevance`, hits below the threshold (the query's
`relevance >= x`, else the model's `filtering_threshold`, default 0.5 as in MindsDB) are dropped, and the
rest are ordered by it. A failing reranker is an error (502), never a silent fallback.

How the scores are asked for, by `method`:

- none (agentkb's default): one request scores every candidate (`{"scores": [...]}` in JSON);
- `multi-class` (MindsDB's default for OpenAI and Azure OpenAI): one request per candidate, the model
  classifying it as `class_1` .. `class_4` (not .. highly relevant); the score is the classes' weights
  (0.25, 0.5, 0.75, 1) averaged by the probabilities of the class token's top 4 log-probabilities;
- `binary`: one request per candidate answering `yes` or `no` in one token; the score is the answer's
  probability (yes) or one minus it (no). MindsDB scores the raw log-probability here (at most 0, so every
  candidate falls below a positive threshold); agentkb scores the probability, as MindsDB's docs describe;
- `no-logprobs` (MindsDB's default for the other providers): one request per candidate answering a score
  from 0 to 100; an answer without a number scores 0, as in MindsDB.

`multi-class` and `binary` read log-probabilities, which only Chat Completions servers (openai, ollama,
azure_openai) give: naming them for another provider, or any other method, is a 400 (`check_model`).
Per-candidate requests run up to 20 at once (MindsDB's `max_concurrent_requests`).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentkb.errors import BadRequest, UpstreamError
from agentkb.kb import chat
from agentkb.kb.apis import names
from agentkb.kb.search import Hit

if TYPE_CHECKING:
    import httpx

DEFAULT_THRESHOLD = 0.5
MAX_PASSAGE_CHARS = 1500
MAX_CONCURRENT = 20
MULTI_CLASS, BINARY, NO_LOGPROBS = "multi-class", "binary", "no-logprobs"
METHODS = (MULTI_CLASS, BINARY, NO_LOGPROBS)
CLASS_WEIGHTS = {"class_1": 0.25, "class_2": 0.5, "class_3": 0.75, "class_4": 1.0}
CLASS_TOKENS = ("1", "2", "3", "4")
PROMPT = (
    "Rate how well each passage answers the query, from 0 (irrelevant) to 1 (answers it fully). "
    'Reply with JSON only: {"scores": [s1, s2, ...]}, one number per passage, in order.\n\n'
    "Query: {query}\n\n{passages}"
)
CLASS_PROMPT = (
    "You evaluate how relevant a document chunk is to a user's search query. Return only the class label "
    "that best represents the relevance:\n"
    '- "class_1": not relevant, or contradicting the query\n'
    '- "class_2": slightly relevant (a little to do with the query, no contradictions)\n'
    '- "class_3": moderately relevant (something to do with the query, perhaps not what the user means)\n'
    '- "class_4": highly relevant (everything to do with the query)\n'
    'Respond with only one of: "class_1", "class_2", "class_3" or "class_4".'
)
CLASS_QUESTION = (
    "Search query: {query}\nDocument chunk: {document}\n\nWhich class best represents the relevance?"
)
BINARY_PROMPT = "Rate the relevance of the document to the query. Respond with 'yes' or 'no'."
BINARY_QUESTION = "Query: {query}\nDocument: {document}\nIs this document relevant?"
SCORE_PROMPT = (
    "Score the relevance between search query and user message on scale between 0 and 100 per cents. "
    "Consider semantic meaning, key concepts, and contextual relevance. Return ONLY a numerical score "
    "between 0 and 100 per cents. No other text. Stop after sending a number. Search query: {query}"
)


def candidates_for(limit: int) -> int:
    """How many hits to fetch before reranking (MindsDB: min(2·limit, limit + 30))."""
    return min(2 * limit, limit + 30)


def check_model(model: Mapping[str, Any]) -> None:
    """400 for a reranking model this server cannot call: an unknown provider, an unknown `method`, a
    method reading log-probabilities on a provider without them, or a provider's missing settings."""
    provider = names.canonical(model.get("provider") or names.OPENAI, "reranking_model")
    method = model.get("method")
    if method is not None and method not in METHODS:
        raise BadRequest(
            f"'reranking_model.method' {method!r} is not supported; use one of: {', '.join(METHODS)}",
            title="Invalid reranking model",
        )
    if method in (MULTI_CLASS, BINARY) and provider not in chat.CHAT_COMPLETIONS:
        raise BadRequest(
            f"'reranking_model.method' {method!r} reads log-probabilities, which provider "
            f"{model.get('provider')!r} does not give; use 'no-logprobs' (or leave method out)",
            title="Invalid reranking model",
        )
    chat.request(model, [{"role": "user", "content": ""}])  # the provider's settings (key, region, ...)


def _scores(content: str, n: int) -> list[float]:
    match = re.search(r"\{.*\}", content, re.DOTALL)
    data = json.loads(match.group(0) if match else content)
    scores = data["scores"] if isinstance(data, dict) else data
    if not isinstance(scores, list) or len(scores) != n:
        raise ValueError(f"expected {n} scores, got {scores!r}")
    return [min(max(float(s), 0.0), 1.0) for s in scores]


def class_score(logprobs: tuple[chat.TokenLogprob, ...] | None) -> float:
    """MindsDB's multi-class score: the class token (the last of `1`..`4`, else the last token), its top
    tokens' probabilities normalised, each `class_<token>` weighted."""
    if not logprobs:
        raise ValueError("method 'multi-class' needs log-probabilities; the answer has none")
    token = next((t for t in reversed(logprobs) if t.token in CLASS_TOKENS), logprobs[-1])
    probabilities = {f"class_{t}": math.exp(lp) for t, lp in token.top or ((token.token, token.logprob),)}
    total = sum(probabilities.values()) or 1.0
    score = sum(CLASS_WEIGHTS.get(label, 0.0) * p / total for label, p in probabilities.items())
    return min(max(score, 0.0), 1.0)


def binary_score(answer: chat.ChatAnswer) -> float:
    """`yes`: its probability; `no`: one minus it; anything else: half its probability."""
    if not answer.logprobs:
        raise ValueError("method 'binary' needs log-probabilities; the answer has none")
    probability = math.exp(answer.logprobs[0].logprob)
    said = answer.content.strip().lower()
    return probability if said == "yes" else 1 - probability if said == "no" else 0.5 * probability


def percent_score(content: str) -> float:
    """The first number in the answer, out of 100 (0 when there is none)."""
    found = re.findall(r"\d+", content)
    return min(max(float(found[0]) / 100, 0.0), 1.0) if found else 0.0


async def _one(
    client: httpx.AsyncClient, model: Mapping[str, Any], method: str, query: str, document: str
) -> float:
    timeout = float(model.get("timeout", 60))
    if method == MULTI_CLASS:
        messages = [
            {"role": "system", "content": CLASS_PROMPT},
            {"role": "user", "content": CLASS_QUESTION.format(query=query, document=document)},
        ]
        extra = {"n": 1, "logprobs": True, "top_logprobs": 4, "max_completion_tokens": 100}
        return class_score((await chat.complete(client, model, messages, extra, timeout)).logprobs)
    if method == BINARY:
        messages = [
            {"role": "system", "content": BINARY_PROMPT},
            {"role": "user", "content": BINARY_QUESTION.format(query=query, document=document)},
        ]
        extra = {"n": 1, "logprobs": True, "max_completion_tokens": 1}
        return binary_score(await chat.complete(client, model, messages, extra, timeout))
    messages = [
        {"role": "system", "content": SCORE_PROMPT.format(query=query)},
        {"role": "user", "content": document},
    ]
    return percent_score((await chat.complete(client, model, messages, None, timeout)).content)


async def _each(
    client: httpx.AsyncClient, model: Mapping[str, Any], method: str, query: str, hits: list[Hit]
) -> list[float]:
    gate = asyncio.Semaphore(MAX_CONCURRENT)

    async def scored(hit: Hit) -> float:
        async with gate:
            return await _one(client, model, method, query, hit.chunk_content)

    return list(await asyncio.gather(*(scored(h) for h in hits)))


async def _together(
    client: httpx.AsyncClient, model: Mapping[str, Any], query: str, hits: list[Hit]
) -> list[float]:
    passages = "\n\n".join(
        f"Passage {i + 1}: {h.chunk_content[:MAX_PASSAGE_CHARS]}" for i, h in enumerate(hits)
    )
    prompt = PROMPT.replace("{query}", query).replace("{passages}", passages)
    answer = await chat.complete(
        client, model, [{"role": "user", "content": prompt}], None, float(model.get("timeout", 60))
    )
    return _scores(answer.content, len(hits))


async def rerank(
    client: httpx.AsyncClient,
    model: dict[str, Any],
    query: str,
    hits: list[Hit],
    threshold: float | None,
    limit: int,
) -> list[Hit]:
    import httpx  # the client's own library, imported by whoever made `client`

    if not hits:
        return hits
    check_model(model)
    method = model.get("method")
    try:
        if method is None:
            scores = await _together(client, model, query, hits)
        else:
            scores = await _each(client, model, str(method), query, hits)
    except httpx.HTTPStatusError as exc:
        raise UpstreamError(
            f"Reranking model {model.get('model_name')!r} failed: HTTP {exc.response.status_code}: "
            f"{exc.response.text[:300]}",
            title="Reranking model error",
        ) from exc
    except (httpx.HTTPError, KeyError, IndexError, ValueError, TypeError) as exc:
        raise UpstreamError(
            f"Reranking model {model.get('model_name')!r} failed: {type(exc).__name__}: {exc}",
            title="Reranking model error",
        ) from exc
    cut = threshold if threshold is not None else float(model.get("filtering_threshold", DEFAULT_THRESHOLD))
    scored = sorted(
        (replace(h, relevance=s) for h, s in zip(hits, scores, strict=False)),
        key=lambda h: -(h.relevance or 0),
    )
    return [h for h in scored if (h.relevance or 0) >= cut][:limit]
