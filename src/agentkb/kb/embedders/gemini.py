"""Embeddings from the Gemini API (`provider = 'google'` or `'gemini'`): `models/{model}:batchEmbedContents`,
one request per batch of up to 100 texts (the API's limit), `dimensions` sent as `outputDimensionality`."""

from __future__ import annotations

from typing import Any, Self

import orjson
import yarl

from agentkb.kb.apis import gemini
from agentkb.kb.embedders.base import Vectors
from agentkb.kb.embedders.http import APIEmbedder, HTTPSession, Request, float_rows, options

MAX_BATCH = 100  # batchEmbedContents takes up to 100 requests


class GeminiEmbedder(APIEmbedder):
    def __init__(self, model_name: str, api: gemini.GeminiAPI, **settings: Any) -> None:
        super().__init__(model_name, where=api.base_url, **settings)
        self.api = api
        self.url = yarl.URL(api.url(model_name, "batchEmbedContents"), encoded=True)
        self.model_path = gemini.model_path(model_name)

    @classmethod
    def from_config(cls, config: dict[str, Any], **shared: Any) -> Self:
        settings = options(config, MAX_BATCH)
        settings["batch_size"] = min(settings["batch_size"], MAX_BATCH)
        client: HTTPSession | None = shared.get("http_client")
        return cls(
            str(config["model_name"]), gemini.api(config, "embedding_model"), client=client, **settings
        )

    def _request(self, batch: list[str]) -> Request:
        one: dict[str, Any] = {"model": self.model_path}
        if self.dimensions is not None:
            one["outputDimensionality"] = self.dimensions
        body = {"requests": [{**one, "content": {"parts": [{"text": text}]}} for text in batch]}
        headers = {"Content-Type": "application/json", **self.api.headers()}
        return Request(self.url, headers, orjson.dumps(body))

    def _vectors(self, body: Any, expected: int) -> Vectors:
        embeddings = body.get("embeddings") if isinstance(body, dict) else None
        if not isinstance(embeddings, list) or len(embeddings) != expected:
            got = len(embeddings) if isinstance(embeddings, list) else "no"
            raise self._error(f"expected {expected} embeddings in 'embeddings', got {got}")
        try:
            return float_rows([item["values"] for item in embeddings])
        except (KeyError, TypeError, ValueError) as exc:
            raise self._error(f"malformed embeddings response ({type(exc).__name__}: {exc})") from exc
