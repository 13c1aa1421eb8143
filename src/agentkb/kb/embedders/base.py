"""The embedder interface: texts in, float32 L2-normalised vectors out, with call accounting."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeAlias

from agentkb import metrics
from agentkb.errors import BadRequest

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# NumPy is imported where vectors are made (a server's start does not need it)
Vectors: TypeAlias = "npt.NDArray[np.float32]"
QUERY_CACHE_SIZE = 1024  # query texts whose vectors an embedder keeps (least recently used dropped first)


@dataclass(slots=True)
class EmbedderStats:
    """How often an embedder's model was called, and for how many texts in all."""

    calls: int = 0
    texts: int = 0
    query_cache_hits: int = 0

    def record(self, texts: int) -> None:
        self.calls += 1
        self.texts += texts


def l2_normalize(vectors: npt.ArrayLike) -> Vectors:
    """Rows scaled to unit length as float32 (all-zero rows stay zero)."""
    import numpy as np

    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2:
        raise ValueError(f"expected a 2-D array of vectors, got shape {array.shape}")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(array / norms, dtype=np.float32)


def positive_int(config: dict[str, Any], key: str, default: int) -> int:
    """`config[key]` as a positive int (the default when absent); BadRequest otherwise."""
    value = config.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise BadRequest(
            f"'embedding_model.{key}' must be a positive integer", title="Invalid embedding model"
        )
    return value


class Embedder(ABC):
    """An embedding model. Subclasses implement `_embed`; `embed_documents` validates and counts.
    `embed_query` keeps the vectors of the last `query_cache_size` query texts (0: none): one instance
    serves one embedding configuration (see `registry`), so a repeated query skips the model call."""

    name: str
    uses_http: ClassVar[bool] = False  # given the registry's shared HTTP session (`http_client`)

    def __init__(self, name: str) -> None:
        self.name = name
        self.stats = EmbedderStats()
        self.query_cache_size = QUERY_CACHE_SIZE
        self._queries: OrderedDict[str, Vectors] = OrderedDict()

    @classmethod
    @abstractmethod
    def from_config(cls, config: dict[str, Any], **shared: Any) -> Self:
        """An instance from a normalised `embedding_model` configuration (see `config.normalize`)."""

    @abstractmethod
    async def _embed(self, texts: list[str]) -> Vectors:
        """Embed a non-empty list of texts; rows in input order, L2-normalised float32."""

    @abstractmethod
    async def dimension(self) -> int:
        """The length of the vectors this model returns."""

    async def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Vectors for `texts`, shape (len(texts), dim), float32, unit-length rows, input order kept."""
        batch = list(texts)
        for text in batch:
            if not isinstance(text, str):
                raise TypeError(f"embedder input must be str, got {type(text).__name__}")
        if not batch:
            import numpy as np

            return np.zeros((0, await self.dimension()), dtype=np.float32)
        self.stats.record(len(batch))
        provider = self.metrics_provider
        metrics.embedding_texts.labels(provider).inc(len(batch))
        with metrics.timed(metrics.embedding_requests, metrics.embedding_errors, provider):
            vectors = await self._embed(batch)
        if vectors.shape[0] != len(batch):
            raise RuntimeError(f"{self.name}: {vectors.shape[0]} vectors for {len(batch)} texts")
        return vectors

    @property
    def metrics_provider(self) -> str:
        """The metrics' `provider` label: the class name without "Embedder" (`local`, `openai`)."""
        return type(self).__name__.removesuffix("Embedder").lower() or "embedder"

    async def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The vector for one query text, shape (dim,), read-only (it may be shared with later calls)."""
        cached = self._queries.get(text)
        if cached is not None:
            self._queries.move_to_end(text)
            self.stats.query_cache_hits += 1
            metrics.query_embedding_cache_hits.labels(self.metrics_provider).inc()
            return cached
        vectors = await self.embed_documents([text])
        import numpy as np

        vector = np.array(vectors[0], dtype=np.float32)
        vector.flags.writeable = False
        if self.query_cache_size > 0:
            self._queries[text] = vector
            while len(self._queries) > self.query_cache_size:
                self._queries.popitem(last=False)
        return vector

    async def aclose(self) -> None:  # noqa: B027 - optional hook: most embedders hold nothing to release
        """Release resources (HTTP clients, ...); the default holds none."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
