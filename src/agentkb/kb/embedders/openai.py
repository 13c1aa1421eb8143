"""Embeddings from any OpenAI-compatible `/v1/embeddings` API (OpenAI, Ollama, vLLM, TEI).

Vectors are asked for as `encoding_format: "base64"` (little-endian float32, decoded with pybase64's SIMD
decoder and NumPy: several times cheaper than parsing JSON floats, and than the standard library's decoder,
which was a visible share of the server's CPU in an insert); a server that answers with float lists anyway
is read as well, and one that refuses the field (a 4xx naming it) is asked again without it, for as long as
this embedder lives.

Requests go through aiohttp (one session shared by the API embedders, `HTTPSession`): per request it costs
a fraction of httpx's CPU, and a query's embedding request is on every search's critical path. Proxies
(`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`, ...) and `~/.netrc` credentials are read from the environment
once per server address and process (`HTTPSession.route`), not per request: aiohttp's own `trust_env`
reads them again for every request, in a worker thread, a sizeable share of the server's CPU per SQL KB
search.
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

import aiohttp
import aiohttp.helpers
import numpy as np
import orjson
import pybase64
import yarl

from agentkb.credentials import openai_env_key
from agentkb.destinations import check_url
from agentkb.errors import BadRequest, UpstreamError
from agentkb.guarded_http import GuardedResolver
from agentkb.kb.embedders.base import Embedder, Vectors, l2_normalize, positive_int

log = logging.getLogger("agentkb.embedders")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
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


def provider_message(response: Answer) -> str:
    """The provider's error message: OpenAI's `{"error": {"message"}}`, `{"error": "..."}`,
    FastAPI's `{"detail"}`, `{"message"}`, else the start of the body."""
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        for value in (error, body.get("detail"), body.get("message")):
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


class OpenAIEmbedder(Embedder):
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
    ) -> None:
        super().__init__(model_name)
        if batch_size <= 0 or concurrency <= 0 or max_attempts <= 0:
            raise ValueError("batch_size, concurrency and max_attempts must be positive")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key if api_key is not None else openai_env_key(self.base_url)
        self.url = f"{self.base_url}/embeddings"
        # credentials in the URL (`http://user:password@host/v1`) are sent as Basic authentication, which
        # then stands for the API key (as httpx and the OpenAI SDK do); aiohttp takes them as a header
        url = yarl.URL(self.url)
        self._target = url.with_user(None) if url.user is not None else url
        self._basic = (
            aiohttp.BasicAuth(url.user, url.password or "").encode() if url.user is not None else None
        )
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
        self._base64 = True  # False once the server refused `encoding_format`

    @classmethod
    def from_config(cls, config: dict[str, Any], **shared: Any) -> Self:
        base_url = config.get("base_url") or DEFAULT_BASE_URL
        api_key = config.get("api_key")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise BadRequest(
                "'embedding_model.base_url' must be an http(s) URL", title="Invalid embedding model"
            )
        check_url(base_url, "embedding_model.base_url")  # an IP literal: aiohttp's resolver never sees it
        if api_key is not None and not isinstance(api_key, str):
            raise BadRequest("'embedding_model.api_key' must be a string", title="Invalid embedding model")
        timeout = config.get("timeout", DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 3600:
            raise BadRequest(
                "'embedding_model.timeout' must be seconds in (0, 3600]", title="Invalid embedding model"
            )
        dimensions = config.get("dimensions")
        return cls(
            str(config["model_name"]),
            api_key=api_key,
            base_url=base_url,
            dimensions=positive_int(config, "dimensions", 1) if dimensions is not None else None,
            batch_size=positive_int(config, "batch_size", DEFAULT_BATCH_SIZE),
            timeout=float(timeout),
            concurrency=positive_int(config, "concurrency", DEFAULT_CONCURRENCY),
            client=shared.get("http_client"),
        )

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
        vectors = self._parse(body, len(batch))
        if self._dim is None:
            self._dim = int(vectors.shape[1])
        elif vectors.shape[1] != self._dim:
            raise UpstreamError(
                f"Embedding model {self.name!r} at {self.base_url} returned vectors of size "
                f"{vectors.shape[1]}, expected {self._dim}"
            )
        return vectors

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self._basic is not None:
            headers["Authorization"] = self._basic
        elif self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    async def _post(self, batch: list[str]) -> Any:
        payload: dict[str, Any] = {"model": self.name, "input": batch}
        if self.dimensions is not None:
            payload["dimensions"] = self.dimensions
        failure = ""
        for attempt in range(1, self.max_attempts + 1):
            if self._base64:
                payload["encoding_format"] = "base64"
            else:
                payload.pop("encoding_format", None)
            delay = min(self.backoff * 2 ** (attempt - 1), self.max_delay)
            try:
                response = await self._send(payload)
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
                if self._refuses_base64(response):
                    self._base64 = False
                    continue
                if response.status != 429 and response.status < 500:
                    raise self._error(failure)
                hinted = retry_after(response)
                if hinted is not None:
                    delay = min(hinted, self.max_delay)
            if attempt < self.max_attempts:
                log.warning("embedding request to %s failed (%s); retry in %.2fs", self.url, failure, delay)
                await asyncio.sleep(delay)
        raise self._error(f"{failure} (after {self.max_attempts} attempts)")

    async def _send(self, payload: dict[str, Any]) -> Answer:
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        route = self._client.route(self._target)
        headers = self._headers()
        async with self._client.get().post(
            self._target,
            data=orjson.dumps(payload),
            headers=headers,
            timeout=timeout,
            proxy=route.proxy,
            proxy_auth=route.proxy_auth,
            auth=None if "Authorization" in headers else route.netrc_auth,
        ) as response:
            content = await response.read()
            return Answer(response.status, response.reason or "", response.headers, content)

    def _refuses_base64(self, response: Answer) -> bool:
        """A 4xx naming `encoding_format` while it was sent: the server speaks only float lists."""
        return (
            self._base64 and response.status in (400, 422) and "encoding_format" in provider_message(response)
        )

    def _error(self, failure: str) -> UpstreamError:
        return UpstreamError(
            f"Embedding model {self.name!r} at {self.base_url} failed: {failure}",
            title="Embedding provider error",
        )

    def _parse(self, body: Any, expected: int) -> Vectors:
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or len(data) != expected:
            got = len(data) if isinstance(data, list) else "no"
            raise self._error(f"expected {expected} embeddings in 'data', got {got}")
        try:
            items = sorted(data, key=lambda item: int(item.get("index", 0)))
            vectors = _decode([item["embedding"] for item in items])
        except (AttributeError, KeyError, TypeError, ValueError, binascii.Error) as exc:
            raise self._error(f"malformed embeddings response ({type(exc).__name__}: {exc})") from exc
        if vectors.ndim != 2 or vectors.shape[1] == 0 or not np.isfinite(vectors).all():
            raise self._error(f"malformed embeddings response (shape {vectors.shape})")
        return vectors

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()


def _decode(embeddings: list[Any]) -> np.ndarray:
    """Base64 strings (little-endian float32) or float lists, as one (n, dim) float32 array."""
    if embeddings and all(isinstance(e, str) for e in embeddings):
        raw = [pybase64.b64decode(e, validate=True) for e in embeddings]  # binascii.Error when malformed
        if len({len(r) for r in raw}) != 1 or len(raw[0]) % 4:
            raise ValueError("base64 embeddings of unequal or non-float32 sizes")
        return np.frombuffer(b"".join(raw), dtype="<f4").reshape(len(raw), -1).astype(np.float32)
    return np.asarray(embeddings, dtype=np.float32)
