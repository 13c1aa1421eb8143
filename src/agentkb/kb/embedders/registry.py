"""One embedder instance per distinct embedding-model configuration, shared by all knowledge bases."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentkb.kb.embedders import config as embedding_config
from agentkb.kb.embedders.base import QUERY_CACHE_SIZE, Embedder
from agentkb.kb.embedders.local import LocalEmbedder
from agentkb.kb.embedders.openai import HTTPSession, OpenAIEmbedder

EMBEDDER_KINDS: dict[str, type[Embedder]] = {
    embedding_config.LOCAL: LocalEmbedder,
    embedding_config.OPENAI: OpenAIEmbedder,
}
CacheKey = tuple[str, str, str | None, str | None, int | None, str | None, str | None]


def cache_key(config: dict[str, Any]) -> CacheKey:
    """(kind, model_name, base_url, api_key, dimensions, engine, precision): configurations that share
    an embedder."""
    dimensions = config.get("dimensions")
    return (
        embedding_config.kind(config),
        str(config["model_name"]),
        config.get("base_url"),
        config.get("api_key"),
        dimensions if isinstance(dimensions, int) else None,
        config.get("engine"),
        config.get("precision"),
    )


class EmbedderRegistry:
    """Creates and caches embedders by configuration; owns the HTTP client the API embedders share.
    `query_cache_size`: the query vectors each embedder keeps (`Embedder.embed_query`)."""

    def __init__(
        self,
        kinds: Mapping[str, type[Embedder]] | None = None,
        http_client: HTTPSession | None = None,
        *,
        query_cache_size: int = QUERY_CACHE_SIZE,
    ) -> None:
        self.kinds: dict[str, type[Embedder]] = dict(EMBEDDER_KINDS if kinds is None else kinds)
        self.query_cache_size = query_cache_size
        self._embedders: dict[CacheKey, Embedder] = {}
        self._owns_client = http_client is None
        self._http_client = http_client

    @property
    def http_client(self) -> HTTPSession:
        """The shared client (its session opens on first use)."""
        if self._http_client is None:
            self._http_client = HTTPSession()
        return self._http_client

    @property
    def embedders(self) -> list[Embedder]:
        """The instances created so far."""
        return list(self._embedders.values())

    def get(self, config: dict[str, Any]) -> Embedder:
        """The embedder for a normalised `embedding_model` configuration (created on first use)."""
        key = cache_key(config)
        embedder = self._embedders.get(key)
        if embedder is None:
            cls = self.kinds[key[0]]
            embedder = cls.from_config(config, http_client=self.http_client)
            embedder.query_cache_size = self.query_cache_size
            self._embedders[key] = embedder
        return embedder

    async def dimension(self, config: dict[str, Any]) -> int:
        """The vector size: from the configuration or the known-models table, else asked of the model."""
        known = embedding_config.known_dimension(config)
        if known is not None:
            return known
        return await self.get(config).dimension()

    async def aclose(self) -> None:
        """Close every embedder and the shared HTTP client; the registry can be reused afterwards."""
        embedders, self._embedders = list(self._embedders.values()), {}
        for embedder in embedders:
            await embedder.aclose()
        if self._owns_client and self._http_client is not None:
            await self._http_client.aclose()
            self._http_client = None
