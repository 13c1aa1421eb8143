"""Connections pinned to the addresses the SSRF guard checked (no second DNS lookup, no DNS rebinding).

The guard (`urls.checked_addresses`) resolves a host once and checks every answer; the crawler records the
answers in a `Pins` map (host → addresses). Requests then go through `pinned_client(pins)`, an
`httpx.AsyncClient` whose transport is an `httpcore.AsyncConnectionPool` with our own network backend
(`PinnedBackend`, httpcore's `network_backend=` extension point): when the pool opens a connection for a
URL's host it asks the backend for a TCP stream to `(host, port)`, and the backend dials one of the host's
pinned addresses instead of resolving the name. Everything above the socket still sees the hostname: the
`Host` header, TLS SNI and certificate verification (httpcore passes the URL's host as `server_hostname`),
and the pool's connection reuse (keyed by scheme, host and port). A host with no pin is never dialled.

httpx's own `AsyncHTTPTransport` has no `network_backend` parameter, so `PinnedTransport` is a small
`httpx.AsyncBaseTransport` (httpx's custom-transport extension point) over the httpcore pool, mapping
requests, responses and httpcore's exceptions to httpx's. Environment proxies are not used: a proxy would
resolve the name itself.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import httpcore
import httpx

from agentkb.guarded_http import dial_in_turn
from agentkb.ingest.crawl.urls import IPAddress

__all__ = ["Pins", "PinnedBackend", "PinnedTransport", "pinned_client"]

Pins = Mapping[str, Sequence[IPAddress]]
"""host (lower case, as in a canonical URL, IPv6 without brackets) → the checked addresses to dial."""

# httpcore's exceptions → httpx's, most specific first (a subclass before its base).
_EXCEPTIONS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextmanager
def _httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for core, mapped in _EXCEPTIONS:
            if isinstance(exc, core):
                raise mapped(str(exc)) from exc
        raise


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """Dials a host's pinned addresses (in order, the next when one fails) through `inner`; refuses a host
    with no pin. `inner` defaults to httpcore's AnyIO backend (tests pass one that records the addresses
    and answers without touching the network)."""

    def __init__(self, pins: Pins, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.pins = pins
        self.inner = inner if inner is not None else httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = self.pins.get(host.lower().strip("[]"))
        if not addresses:
            raise httpcore.ConnectError(f"{host} has no address checked by the SSRF guard; not connecting")
        options = list(socket_options) if socket_options is not None else None
        return await dial_in_turn(
            lambda address: self.inner.connect_tcp(address, port, timeout, local_address, options),
            addresses,
            (httpcore.ConnectError, httpcore.ConnectTimeout, OSError),
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("the crawler does not connect to unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, stream: AsyncIterable[bytes]) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            with _httpx_errors():
                await close()


class PinnedTransport(httpx.AsyncBaseTransport):
    """An HTTP/1.1 transport whose connections go only to pinned addresses (see the module docstring)."""

    def __init__(
        self,
        pins: Pins,
        network: httpcore.AsyncNetworkBackend | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
        limits: httpx.Limits | None = None,
    ) -> None:
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context if ssl_context is not None else httpx.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
            network_backend=PinnedBackend(pins, network),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _httpx_errors():
            response = await self._pool.handle_async_request(core_request)
        assert isinstance(response.stream, AsyncIterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


def pinned_client(
    pins: Pins,
    network: httpcore.AsyncNetworkBackend | None = None,
    *,
    timeout: float = 15,
    ssl_context: ssl.SSLContext | None = None,
) -> httpx.AsyncClient:
    """A client that connects only to pinned addresses: redirects are not followed (the crawler follows
    them by hand, checking and pinning each hop), and environment proxies are ignored."""
    return httpx.AsyncClient(
        transport=PinnedTransport(pins, network, ssl_context=ssl_context),
        trust_env=False,
        follow_redirects=False,
        timeout=timeout,
    )
