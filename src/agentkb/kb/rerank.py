"""Reranking search hits with an LLM (any OpenAI-compatible Chat Completions server), MindsDB-style.

Used when a knowledge base has a `reranking_model` ({provider: openai|ollama, model_name, api_key?,
base_url?, filtering_threshold?}) and the query does not say `reranking = false`. One request scores every
candidate from 0 to 1; that score becomes the hit's `relevance`, hits below the threshold (the query's
`relevance >= x`, else the model's `filtering_threshold`, default 0.5 as in MindsDB) are dropped, and the
rest are ordered by it. A failing reranker is an error (502), never a silent fallback.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import httpx

from agentkb.credentials import openai_env_key
from agentkb.destinations import check_url
from agentkb.errors import BadRequest, UpstreamError
from agentkb.kb.search import Hit

DEFAULT_THRESHOLD = 0.5
DEFAULT_BASE_URL = "https://api.openai.com/v1"
OLLAMA_BASE_URL = "http://127.0.0.1:11434/v1"
MAX_PASSAGE_CHARS = 1500
PROMPT = (
    "Rate how well each passage answers the query, from 0 (irrelevant) to 1 (answers it fully). "
    'Reply with JSON only: {"scores": [s1, s2, ...]}, one number per passage, in order.\n\n'
    "Query: {query}\n\n{passages}"
)


def candidates_for(limit: int) -> int:
    """How many hits to fetch before reranking (MindsDB: min(2·limit, limit + 30))."""
    return min(2 * limit, limit + 30)


def _endpoint(model: dict[str, Any]) -> tuple[str, dict[str, str]]:
    provider = model.get("provider", "openai")
    if provider not in ("openai", "ollama"):
        raise BadRequest(
            f"reranking_model provider {provider!r} is not supported; use openai or ollama",
            title="Invalid reranking model",
        )
    base_url = str(model.get("base_url") or (OLLAMA_BASE_URL if provider == "ollama" else DEFAULT_BASE_URL))
    check_url(base_url, "reranking_model.base_url")
    key = model.get("api_key") or openai_env_key(base_url)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return base_url.rstrip("/") + "/chat/completions", headers


def _scores(content: str, n: int) -> list[float]:
    match = re.search(r"\{.*\}", content, re.DOTALL)
    data = json.loads(match.group(0) if match else content)
    scores = data["scores"] if isinstance(data, dict) else data
    if not isinstance(scores, list) or len(scores) != n:
        raise ValueError(f"expected {n} scores, got {scores!r}")
    return [min(max(float(s), 0.0), 1.0) for s in scores]


async def rerank(
    client: httpx.AsyncClient,
    model: dict[str, Any],
    query: str,
    hits: list[Hit],
    threshold: float | None,
    limit: int,
) -> list[Hit]:
    if not hits:
        return hits
    url, headers = _endpoint(model)
    passages = "\n\n".join(
        f"Passage {i + 1}: {h.chunk_content[:MAX_PASSAGE_CHARS]}" for i, h in enumerate(hits)
    )
    body = {
        "model": model.get("model_name"),
        "temperature": 0,
        "messages": [
            {"role": "user", "content": PROMPT.replace("{query}", query).replace("{passages}", passages)}
        ],
    }
    try:
        response = await client.post(url, json=body, headers=headers, timeout=float(model.get("timeout", 60)))
        response.raise_for_status()
        scores = _scores(response.json()["choices"][0]["message"]["content"], len(hits))
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
