"""What the embedders of HTTP APIs share (OpenAI and compatible servers, Azure OpenAI, Gemini, Bedrock,
Snowflake Cortex): one aiohttp session, the environment's proxies, batches sent concurrently, retries.

Requests go through aiohttp (one session shared by the API embedders, `HTTPSession`): per request it costs
a fraction of httpx's CPU, and a query's embedding request is on every search's critical path. Proxies
(`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`, ...) and `~/.netrc` credentials are read from the environment
once per server address and process (`HTTPSession.route`), not per request: aiohttp's own `trust_env`
reads them again for every request, in a worker thread, a sizeable share of the server's CPU per SQL KB
search. Connections go only where `destinations` allows (`GuardedResolver`).

`APIEmbedder` is one API: texts in batches of `batch_size`, up to `concurrency` requests at once, 429 and
5xx retried with exponential back-off (honouring `Retry-After`), any other 4xx an error at once; a
subclass says what one request is (`_request`) and reads its answer (`_vectors`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from abc import abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import aiohttp
import aiohttp.helpers
import numpy as np
import orjson
import yarl

from agentkb.errors import BadRequest, UpstreamError
from agentkb.guarded_http.resolver import GuardedResolver
from agentkb.kb.embedders.base import Embedder, Vectors, l2_normalize, positive_int

log = logging.getLogger("agentkb.embedders")

DEFAULT_BATCH_SIZE = 256
DEFAULT_TIMEOUT = 60.0
DEFAULT_CONCURRENCY = 4
MAX_ATTEMPTS = 5
BACKOFF = 0.5
MAX_DELAY = 10.0
PROBE_TEXT = "dimension probe"
_RETRYABLE_ERRORS = (TimeoutError, aiohttp.ClientConnectionError, aiohttp.ClientPayloadError)
MAX_CONNECTIONS = 32


@dataclass(frozen=True, slots=True)
class Route:
    """How requests to one server go, from the environment: through a proxy (with its credentials), and
    with `~/.netrc` credentials for the server (used when a request carries no Authorization header)."""

    proxy: yarl.URL | None = None
    proxy_auth: aiohttp.BasicAuth | None = None
    netrc_auth: aiohttp.BasicAuth | None = None


def route_from_environment(url: yarl.URL) -> Route:
    """What aiohttp's `trust_env` finds for `url`: its proxy (`*_PROXY`, unless `NO_PROXY` exempts the
    host) and the host's `~/.netrc` (`NETRC`) entry."""
    try:
        proxy, proxy_auth = aiohttp.helpers.get_env_proxy_for_url(url)
    except LookupError:
        proxy, proxy_auth = None, None
    netrc_auth = None
    if url.host is not None:
        with contextlib.suppress(LookupError):
            netrc_auth = aiohttp.helpers.basicauth_from_netrc(aiohttp.helpers.netrc_from_env(), url.host)
    return Route(proxy, proxy_auth, netrc_auth)


class HTTPSession:
    """One aiohttp session for the API embedders, opened on first use (inside the event loop, as aiohttp
    asks) with up to `limit` connections; proxies and netrc credentials from the environment, read once per
    server (`route`)."""

    def __init__(self, limit: int = MAX_CONNECTIONS) -> None:
        self.limit = limit
        self._session: aiohttp.ClientSession | None = None
        self._routes: dict[tuple[str, str | None, int | None], Route] = {}

    def get(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.limit, resolver=GuardedResolver())
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    def route(self, url: yarl.URL) -> Route:
        key = (url.scheme, url.host, url.port)
        found = self._routes.get(key)
        if found is None:
            found = self._routes[key] = route_from_environment(url)
        return found

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


@dataclass(frozen=True, slots=True)
class Answer:
    """A provider's HTTP answer, read whole."""

    status: int
    reason: str
    headers: Mapping[str, str]
    content: bytes

    @property
    def is_success(self) -> bool:
        return 200 <= self.status < 300


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP POST of an embedding request: where, its headers, its body's bytes."""

    url: yarl.URL
    headers: dict[str, str]
    body: bytes


def provider_message(response: Answer) -> str:
    """The provider's error message: OpenAI's and Google's `{"error": {"message"}}`, `{"error": "..."}`,
    FastAPI's `{"detail"}`, `{"message"}` (Bedrock, Snowflake), else the start of the body."""
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        for value in (error, body.get("detail"), body.get("message"), body.get("Message")):
            if isinstance(value, str) and value:
                return value
    text = " ".join(response.content.decode("utf-8", "replace").split())
    return text[:500] or response.reason


def retry_after(response: Answer) -> float | None:
    """The Retry-After header in seconds, when it is a number."""
    try:
        value = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return max(value, 0.0) if math.isfinite(value) else None


def options(config: Mapping[str, Any], batch_size: int = DEFAULT_BATCH_SIZE) -> dict[str, Any]:
    """The HTTP settings every API embedder takes from its configuration (`timeout`, `batch_size`,
    `concurrency`, `dimensions`), checked."""
    timeout = config.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 3600:
        raise BadRequest(
            "'embedding_model.timeout' must be seconds in (0, 3600]", title="Invalid embedding model"
        )
    for key in ("api_key",):
        if config.get(key) is not None and not isinstance(config[key], str):
            raise BadRequest(f"'embedding_model.{key}' must be a string", title="Invalid embedding model")
    dimensions = config.get("dimensions")
    return {
        "dimensions": positive_int(dict(config), "dimensions", 1) if dimensions is not None else None,
        "batch_size": positive_int(dict(config), "batch_size", batch_size),
        "timeout": float(timeout),
        "concurrency": positive_int(dict(config), "concurrency", DEFAULT_CONCURRENCY),
    }


class APIEmbedder(Embedder):
    """An embeddings API called in batches with retries (see the module's docstring). `where` names the
    server in messages."""

    uses_http: ClassVar[bool] = True

    def __init__(
        self,
        model_name: str,
        *,
        where: str,
        dimensions: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        timeout: float = DEFAULT_TIMEOUT,
        concurrency: int = DEFAULT_CONCURRENCY,
        max_attempts: int = MAX_ATTEMPTS,
        backoff: float = BACKOFF,
        max_delay: float = MAX_DELAY,
        client: HTTPSession | None = None,
    ) -> None:
        super().__init__(model_name)
        if batch_size <= 0 or concurrency <= 0 or max_attempts <= 0:
            raise ValueError("batch_size, concurrency and max_attempts must be positive")
        self.where = where
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_delay = max_delay
        self._owns_client = client is None
        self._client = client if client is not None else HTTPSession(concurrency)
        self._semaphore = asyncio.Semaphore(concurrency)
        self._probe_lock = asyncio.Lock()
        self._dim: int | None = dimensions

    @abstractmethod
    def _request(self, batch: list[str]) -> Request:
        """The request embedding `batch` (made again for each attempt: signatures and tokens are fresh)."""

    @abstractmethod
    def _vectors(self, body: Any, expected: int) -> Vectors:
        """The vectors of a successful answer's JSON, in input order (any scale: normalised after)."""

    def _retry_at_once(self, response: Answer) -> bool:
        """Whether a failed answer asks for the request to be made again, changed, without waiting."""
        return False

    def _indexed_data(self, body: Any, expected: int, rows: Callable[[list[Any]], Vectors]) -> Vectors:
        """The vectors of an answer shaped as OpenAI's: `data`, `expected` items of {"index", "embedding"},
        put in index order; `rows` makes the array of their embeddings."""
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or len(data) != expected:
            got = len(data) if isinstance(data, list) else "no"
            raise self._error(f"expected {expected} embeddings in 'data', got {got}")
        try:
            items = sorted(data, key=lambda item: int(item.get("index", 0)))
            return rows([item["embedding"] for item in items])
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as exc:  # binascii.Error too
            raise self._error(f"malformed embeddings response ({type(exc).__name__}: {exc})") from exc

    async def dimension(self) -> int:
        if self._dim is None:
            async with self._probe_lock:
                if self._dim is None:
                    await self.embed_documents([PROBE_TEXT])  # sets self._dim
        assert self._dim is not None
        return self._dim

    async def _embed(self, texts: list[str]) -> Vectors:
        batches = [texts[i : i + self.batch_size] for i in range(0, len(texts), self.batch_size)]
        if len(batches) == 1:  # a query, a small insert: one request, awaited here (no task to schedule)
            parts = [await self._embed_batch(batches[0])]
        else:
            parts = await asyncio.gather(*(self._embed_batch(batch) for batch in batches))
        return l2_normalize(np.concatenate(parts, axis=0))

    async def _embed_batch(self, batch: list[str]) -> Vectors:
        async with self._semaphore:
            body = await self._post(batch)
        vectors = self._checked(self._vectors(body, len(batch)), len(batch))
        if self._dim is None:
            self._dim = int(vectors.shape[1])
        elif vectors.shape[1] != self._dim:
            raise UpstreamError(
                f"Embedding model {self.name!r} at {self.where} returned vectors of size "
                f"{vectors.shape[1]}, expected {self._dim}"
            )
        return vectors

    def _checked(self, vectors: Vectors, expected: int) -> Vectors:
        if vectors.ndim != 2 or vectors.shape[0] != expected or vectors.shape[1] == 0:
            raise self._error(f"malformed embeddings response (shape {vectors.shape}, {expected} texts)")
        if not np.isfinite(vectors).all():
            raise self._error("malformed embeddings response (values that are not finite)")
        return vectors

    async def _post(self, batch: list[str]) -> Any:
        failure = ""
        for attempt in range(1, self.max_attempts + 1):
            delay = min(self.backoff * 2 ** (attempt - 1), self.max_delay)
            try:
                response = await self._send(self._request(batch))
            except _RETRYABLE_ERRORS as exc:
                failure = f"{type(exc).__name__}: {exc}".rstrip(": ")
            except (aiohttp.ClientError, ValueError) as exc:  # ValueError: a request aiohttp cannot build
                raise self._error(f"{type(exc).__name__}: {exc}") from exc
            else:
                if response.is_success:
                    try:
                        return orjson.loads(response.content)
                    except orjson.JSONDecodeError as exc:
                        raise self._error(f"HTTP {response.status}: response is not JSON") from exc
                failure = f"HTTP {response.status}: {provider_message(response)}"
                if self._retry_at_once(response):
                    continue
                if response.status != 429 and response.status < 500:
                    raise self._error(failure)
                hinted = retry_after(response)
                if hinted is not None:
                    delay = min(hinted, self.max_delay)
            if attempt < self.max_attempts:
                log.warning("embedding request to %s failed (%s); retry in %.2fs", self.where, failure, delay)
                await asyncio.sleep(delay)
        raise self._error(f"{failure} (after {self.max_attempts} attempts)")

    async def _send(self, request: Request) -> Answer:
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        route = self._client.route(request.url)
        async with self._client.get().post(
            request.url,
            data=request.body,
            headers=request.headers,
            timeout=timeout,
            proxy=route.proxy,
            proxy_auth=route.proxy_auth,
            auth=None if "Authorization" in request.headers else route.netrc_auth,
        ) as response:
            content = await response.read()
            return Answer(response.status, response.reason or "", response.headers, content)

    def _error(self, failure: str) -> UpstreamError:
        return UpstreamError(
            f"Embedding model {self.name!r} at {self.where} failed: {failure}",
            title="Embedding provider error",
        )

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()


def float_rows(rows: Any) -> Vectors:
    """A list of float lists as one (n, dim) float32 array (ValueError when ragged or not numbers)."""
    return np.asarray(rows, dtype=np.float32)
