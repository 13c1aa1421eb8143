"""Embeddings from Snowflake Cortex (`kb/apis/snowflake.py`): `POST /api/v2/cortex/inference:embed` with
`{"text": [...], "model": ...}` → `{"data": [{"embedding": [[...]], "index": i}]}` (MindsDB reads each
item's first vector, as here)."""

from __future__ import annotations

from typing import Any, Self

import orjson
import yarl

from agentkb.kb.apis import snowflake
from agentkb.kb.embedders.base import Vectors
from agentkb.kb.embedders.http import APIEmbedder, HTTPSession, Request, float_rows, options

DEFAULT_BATCH = 100


class SnowflakeEmbedder(APIEmbedder):
    def __init__(self, model_name: str, api: snowflake.SnowflakeAPI, **settings: Any) -> None:
        super().__init__(model_name, where=api.base_url, **settings)
        self.api = api
        self.url = yarl.URL(api.url("embed"), encoded=True)

    @classmethod
    def from_config(cls, config: dict[str, Any], **shared: Any) -> Self:
        client: HTTPSession | None = shared.get("http_client")
        api = snowflake.api(config, "embedding_model")
        return cls(str(config["model_name"]), api, client=client, **options(config, DEFAULT_BATCH))

    def _request(self, batch: list[str]) -> Request:
        body = orjson.dumps({"text": batch, "model": self.name})
        return Request(self.url, self.api.headers(), body)

    def _vectors(self, body: Any, expected: int) -> Vectors:
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or len(data) != expected:
            got = len(data) if isinstance(data, list) else "no"
            raise self._error(f"expected {expected} embeddings in 'data', got {got}")
        try:
            items = sorted(data, key=lambda item: int(item.get("index", 0)))
            return float_rows([item["embedding"][0] for item in items])
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise self._error(f"malformed embeddings response ({type(exc).__name__}: {exc})") from exc
