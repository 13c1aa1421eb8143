"""One embedder instance per distinct embedding-model configuration, shared by all knowledge bases."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

from agentkb.kb.embedders import config as embedding_config
from agentkb.kb.embedders.base import QUERY_CACHE_SIZE, Embedder

if TYPE_CHECKING:
    from agentkb.kb.embedders.http import HTTPSession


def embedder_kind(kind: str) -> type[Embedder]:
    """The class of one kind of embedder, its module imported when the first embedder of that kind is
    built (the API embedders bring aiohttp, a large import; a server may use none of them)."""
    if kind == embedding_config.LOCAL:
        from agentkb.kb.embedders.local import LocalEmbedder

        return LocalEmbedder
    if kind == embedding_config.OPENAI:
        from agentkb.kb.embedders.openai import OpenAIEmbedder

        return OpenAIEmbedder
    if kind == embedding_config.AZURE:
        from agentkb.kb.embedders.openai import AzureOpenAIEmbedder

        return AzureOpenAIEmbedder
    if kind == embedding_config.GEMINI:
        from agentkb.kb.embedders.gemini import GeminiEmbedder

        return GeminiEmbedder
    if kind == embedding_config.BEDROCK:
        from agentkb.kb.embedders.bedrock import BedrockEmbedder

        return BedrockEmbedder
    if kind == embedding_config.SNOWFLAKE:
        from agentkb.kb.embedders.snowflake import SnowflakeEmbedder

        return SnowflakeEmbedder
    raise KeyError(kind)


# what a configuration's embedder does not depend on (`ollama` and `openai` are the same client)
_NOT_KEYED = ("provider", "use_default_llm")
CacheKey = tuple[str, bytes]


def cache_key(config: dict[str, Any]) -> CacheKey:
    """(kind, every other setting): configurations that share an embedder."""
    rest = {k: v for k, v in config.items() if k not in _NOT_KEYED}
    return embedding_config.kind(config), orjson.dumps(rest, option=orjson.OPT_SORT_KEYS, default=str)


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
        self.kinds: dict[str, type[Embedder]] | None = None if kinds is None else dict(kinds)
        self.query_cache_size = query_cache_size
        self._embedders: dict[CacheKey, Embedder] = {}
        self._owns_client = http_client is None
        self._http_client = http_client

    @property
    def http_client(self) -> HTTPSession:
        """The shared client (its session opens on first use)."""
        if self._http_client is None:
            from agentkb.kb.embedders.http import HTTPSession

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
            cls = embedder_kind(key[0]) if self.kinds is None else self.kinds[key[0]]
            shared = {"http_client": self.http_client} if cls.uses_http else {}
            embedder = cls.from_config(config, **shared)
            embedder.query_cache_size = self.query_cache_size
            self._embedders[key] = embedder
        return embedder

    async def dimension(self, config: dict[str, Any]) -> int:
        """The vector size: from the configuration or the known-models table, else asked of the model; the
        configuration is checked either way (its embedder built)."""
        embedder = self.get(config)  # built first: a configuration it cannot use is refused (400) here
        known = embedding_config.known_dimension(config)
        return known if known is not None else await embedder.dimension()

    async def aclose(self) -> None:
        """Close every embedder and the shared HTTP client; the registry can be reused afterwards."""
        embedders, self._embedders = list(self._embedders.values()), {}
        for embedder in embedders:
            await embedder.aclose()
        if self._owns_client and self._http_client is not None:
            await self._http_client.aclose()
            self._http_client = None
