"""Embeddings from any OpenAI-compatible `/v1/embeddings` API (OpenAI, Ollama, vLLM, TEI), and from Azure
OpenAI's deployments (the same API under `/openai/deployments/{deployment}/embeddings?api-version=…`, the
key in `api-key`).

Vectors are asked for as `encoding_format: "base64"` (little-endian float32, decoded with pybase64's SIMD
decoder and NumPy: several times cheaper than parsing JSON floats, and than the standard library's decoder,
which was a visible share of the server's CPU in an insert); a server that answers with float lists anyway
is read as well, and one that refuses the field (a 4xx naming it) is asked again without it, for as long as
this embedder lives. The HTTP side (session, proxies, retries) is `http.APIEmbedder`'s.
"""

from __future__ import annotations

from typing import Any, Self

import aiohttp
import numpy as np
import orjson
import pybase64
import yarl

from agentkb.credentials import openai_env_key
from agentkb.destinations import check_url
from agentkb.errors import BadRequest
from agentkb.kb.apis import azure
from agentkb.kb.embedders.base import Vectors
from agentkb.kb.embedders.http import (
    BACKOFF,
    DEFAULT_BATCH_SIZE,
    DEFAULT_CONCURRENCY,
    DEFAULT_TIMEOUT,
    MAX_ATTEMPTS,
    MAX_DELAY,
    Answer,
    APIEmbedder,
    HTTPSession,
    Request,
    options,
    provider_message,
)

__all__ = ["AzureOpenAIEmbedder", "HTTPSession", "OpenAIEmbedder"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIEmbedder(APIEmbedder):
    """An OpenAI-compatible embeddings endpoint, called in batches with retries."""

    def __init__(
        self,
        model_name: str,
        *,
        api_key: str | None = None,
        base_url: str = DEFAULT_BASE_URL,
        dimensions: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        timeout: float = DEFAULT_TIMEOUT,
        concurrency: int = DEFAULT_CONCURRENCY,
        max_attempts: int = MAX_ATTEMPTS,
        backoff: float = BACKOFF,
        max_delay: float = MAX_DELAY,
        client: HTTPSession | None = None,
        url: str | None = None,
        key_header: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        super().__init__(
            model_name,
            where=self.base_url,
            dimensions=dimensions,
            batch_size=batch_size,
            timeout=timeout,
            concurrency=concurrency,
            max_attempts=max_attempts,
            backoff=backoff,
            max_delay=max_delay,
            client=client,
        )
        self.api_key = api_key if api_key is not None or key_header else openai_env_key(self.base_url)
        self.url = url or f"{self.base_url}/embeddings"
        self._key_header = key_header  # None: `Authorization: Bearer <key>`
        # credentials in the URL (`http://user:password@host/v1`) are sent as Basic authentication, which
        # then stands for the API key (as httpx and the OpenAI SDK do); aiohttp takes them as a header
        parsed = yarl.URL(self.url)
        self._target = parsed.with_user(None) if parsed.user is not None else parsed
        self._basic = (
            aiohttp.BasicAuth(parsed.user, parsed.password or "").encode()
            if parsed.user is not None
            else None
        )
        self._base64 = True  # False once the server refused `encoding_format`

    @classmethod
    def from_config(cls, config: dict[str, Any], **shared: Any) -> Self:
        base_url = config.get("base_url") or DEFAULT_BASE_URL
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise BadRequest(
                "'embedding_model.base_url' must be an http(s) URL", title="Invalid embedding model"
            )
        check_url(base_url, "embedding_model.base_url")  # an IP literal: aiohttp's resolver never sees it
        return cls(
            str(config["model_name"]),
            api_key=config.get("api_key"),
            base_url=base_url,
            client=shared.get("http_client"),
            **options(config),
        )

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self._basic is not None:
            headers["Authorization"] = self._basic
        elif self.api_key and self._key_header:
            headers[self._key_header] = self.api_key
        elif self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _request(self, batch: list[str]) -> Request:
        payload: dict[str, Any] = {"model": self.name, "input": batch}
        if self.dimensions is not None:
            payload["dimensions"] = self.dimensions
        if self._base64:
            payload["encoding_format"] = "base64"
        return Request(self._target, self._headers(), orjson.dumps(payload))

    def _retry_at_once(self, response: Answer) -> bool:
        """A 4xx naming `encoding_format` while it was sent: the server speaks only float lists."""
        if self._base64 and response.status in (400, 422) and "encoding_format" in provider_message(response):
            self._base64 = False
            return True
        return False

    def _vectors(self, body: Any, expected: int) -> Vectors:
        return self._indexed_data(body, expected, _decode)


class AzureOpenAIEmbedder(OpenAIEmbedder):
    """A deployment of an Azure OpenAI resource (`kb/apis/azure.py`): OpenAI's request and answer, Azure's
    URL and `api-key` header."""

    @classmethod
    def from_config(cls, config: dict[str, Any], **shared: Any) -> Self:
        found = azure.deployment(config, "embedding_model")
        return cls(
            str(config["model_name"]),
            api_key=found.api_key,
            base_url=found.endpoint,
            url=found.url("embeddings"),
            key_header="api-key",
            client=shared.get("http_client"),
            **options(config),
        )


def _decode(embeddings: list[Any]) -> np.ndarray:
    """Base64 strings (little-endian float32) or float lists, as one (n, dim) float32 array."""
    if embeddings and all(isinstance(e, str) for e in embeddings):
        raw = [pybase64.b64decode(e, validate=True) for e in embeddings]  # binascii.Error when malformed
        if len({len(r) for r in raw}) != 1 or len(raw[0]) % 4:
            raise ValueError("base64 embeddings of unequal or non-float32 sizes")
        return np.frombuffer(b"".join(raw), dtype="<f4").reshape(len(raw), -1).astype(np.float32)
    return np.asarray(embeddings, dtype=np.float32)
