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
        # Snowflake's `data` is OpenAI's, each embedding a list holding the one vector
        return self._indexed_data(body, expected, lambda embeddings: float_rows([e[0] for e in embeddings]))
