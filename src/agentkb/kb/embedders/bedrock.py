"""Embeddings from Amazon Bedrock (`InvokeModel`, SigV4-signed: `kb/apis/aws.py`), in the request shape of
the model's family:

- Amazon Titan (`amazon.titan-embed-*`, and any other model): `{"inputText": text}` per request, one text
  each (MindsDB's shape), `dimensions` sent as Titan v2's `dimensions` → `{"embedding": [...]}`;
- Cohere (`cohere.embed-*`, with or without a cross-region prefix such as `us.`): up to 96 texts per request,
  `{"texts": [...], "input_type": "search_document"}` → `{"embeddings": [[...]]}` (v3) or
  `{"embeddings": {"float": [[...]]}}` (v4, which is asked for `embedding_types: ["float"]`).
"""

from __future__ import annotations

from typing import Any, Self

import orjson
import yarl

from agentkb.kb.apis import aws
from agentkb.kb.embedders.base import Vectors
from agentkb.kb.embedders.http import APIEmbedder, HTTPSession, Request, float_rows, options

COHERE_BATCH = 96  # Cohere's embed takes up to 96 texts


def is_cohere(model_id: str) -> bool:
    return "cohere.embed" in model_id


class BedrockEmbedder(APIEmbedder):
    def __init__(self, model_name: str, api: aws.BedrockAPI, **settings: Any) -> None:
        super().__init__(model_name, where=api.base_url, **settings)
        self.api = api
        self.invoke_url = api.url(model_name, "invoke")
        self.cohere = is_cohere(model_name)

    @classmethod
    def from_config(cls, config: dict[str, Any], **shared: Any) -> Self:
        model = str(config["model_name"])
        settings = options(config, COHERE_BATCH)
        settings["batch_size"] = min(settings["batch_size"], COHERE_BATCH) if is_cohere(model) else 1
        client: HTTPSession | None = shared.get("http_client")
        return cls(model, aws.api(config, "embedding_model"), client=client, **settings)

    def _request(self, batch: list[str]) -> Request:
        payload: dict[str, Any]
        if self.cohere:
            payload = {"texts": batch, "input_type": "search_document"}
            if "embed-v4" in self.name:
                payload["embedding_types"] = ["float"]
        else:
            payload = {"inputText": batch[0]}
            if self.dimensions is not None:
                payload["dimensions"] = self.dimensions
        body = orjson.dumps(payload)
        return Request(yarl.URL(self.invoke_url, encoded=True), self.api.headers(self.invoke_url, body), body)

    def _vectors(self, body: Any, expected: int) -> Vectors:
        if not isinstance(body, dict):
            raise self._error("malformed embeddings response (not a JSON object)")
        try:
            if not self.cohere:
                return float_rows([body["embedding"]])
            found = body["embeddings"]
            return float_rows(found["float"] if isinstance(found, dict) else found)
        except (KeyError, TypeError, ValueError) as exc:
            raise self._error(f"malformed embeddings response ({type(exc).__name__}: {exc})") from exc
