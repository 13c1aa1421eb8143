"""HTTP clients for model servers that connect only to addresses `destinations` allows, checked when each
connection is opened (not when the model was stored), and dialled as checked (no second lookup).

- aiohttp (the embedders): `resolver.GuardedResolver`, the connector's resolver (aiohttp's `resolver=`
  extension point), in a module of its own so that aiohttp (a large import) is imported by the embedders
  that use it only. aiohttp does not resolve an IP-literal host, so the embedders check their URL too
  (`destinations.check_url`).
- httpx (the reranker) and httpx2 (the agents' LLM providers): a transport whose connection pool dials
  through a network backend that resolves the host with `destinations.allowed_addresses` and connects to
  those addresses (httpcore's `network_backend=` extension point); TLS still verifies the URL's host name.
  Neither library's transport takes a network backend, so `GuardedTransport` builds the transport's pool
  (`_pool`, the one attribute its requests go through) with one. httpcore2 is httpcore's fork with the same
  interface, so one backend class and one pool builder serve both, given the library's module. Environment
  proxies are not used by these two clients: a proxy would resolve the name itself.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from agentkb.destinations import allowed_addresses

if TYPE_CHECKING:
    import httpx
    import httpx2

__all__ = ["dial_in_turn", "guarded_httpx2_transport", "guarded_httpx_client"]


_Stream = TypeVar("_Stream")


async def dial_in_turn(
    connect: Callable[[str], Awaitable[_Stream]],
    addresses: Iterable[object],
    retry: tuple[type[Exception], ...],
) -> _Stream:
    """`connect` to each of `addresses` (non-empty) in turn, the next when one fails with `retry`'s errors;
    the last failure is raised when all fail."""
    failure: Exception | None = None
    for address in addresses:
        try:
            return await connect(str(address))
        except retry as exc:
            failure = exc
    assert failure is not None
    raise failure


class _Backend:
    """A network backend for `core`'s connection pool (httpcore or httpcore2, which share the interface):
    dials the allowed addresses of the host through `core`'s AnyIO backend."""

    def __init__(self, core: ModuleType) -> None:
        self.core = core
        self.inner = core.AnyIOBackend()
        self.retry: tuple[type[Exception], ...] = (core.ConnectError, core.ConnectTimeout, OSError)

    async def connect_tcp(self, host: str, port: int, **options: Any) -> Any:
        """A stream to one of `host`'s allowed addresses; the pool's `options` (timeout, local address,
        socket options) go to the inner backend as given."""
        addresses = await asyncio.to_thread(allowed_addresses, host.strip("[]"), port, "model server")
        return await dial_in_turn(
            lambda address: self.inner.connect_tcp(address, port, **options), addresses, self.retry
        )

    async def connect_unix_socket(self, path: str, **options: Any) -> Any:
        raise self.core.ConnectError("model servers are not reached over unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def _guarded_pool(http: ModuleType, core: ModuleType, limits: Any) -> Any:
    """`core`'s connection pool for `http`'s transport (httpx over httpcore, httpx2 over httpcore2), with
    `limits` and a `_Backend` that dials only allowed addresses."""
    return core.AsyncConnectionPool(
        ssl_context=http.create_ssl_context(),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=_Backend(core),
    )


@functools.cache
def _httpx_transport() -> Callable[[httpx.Limits], httpx.AsyncHTTPTransport]:
    """httpx's transport over the guarded pool. The class is made by the first reranker client: httpx is a
    large import (its command-line tool's libraries come with it), which a server that reranks nothing
    does not pay."""
    import httpcore
    import httpx

    class GuardedTransport(httpx.AsyncHTTPTransport):
        def __init__(self, limits: httpx.Limits) -> None:
            super().__init__(trust_env=False, limits=limits)
            self._pool = _guarded_pool(httpx, httpcore, limits)

    return GuardedTransport


@functools.cache
def _httpx2_transport() -> Callable[[httpx2.Limits], httpx2.AsyncHTTPTransport]:
    """httpx2's transport over the guarded pool, made with the first model's client (as `_httpx_transport`)."""
    import httpcore2
    import httpx2

    class GuardedTransport2(httpx2.AsyncHTTPTransport):
        def __init__(self, limits: httpx2.Limits) -> None:
            super().__init__(trust_env=False, limits=limits)
            self._pool = _guarded_pool(httpx2, httpcore2, limits)

    return GuardedTransport2


def guarded_httpx_client() -> httpx.AsyncClient:
    """An httpx client (httpx's default limits) whose connections go only to allowed addresses."""
    import httpx

    limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
    transport = _httpx_transport()(limits)
    return httpx.AsyncClient(transport=transport, trust_env=False)


def guarded_httpx2_transport(limits: httpx2.Limits | None = None) -> httpx2.AsyncHTTPTransport:
    """An httpx2 transport whose connections go only to allowed addresses (for `create_async_httpx2_client`)."""
    import httpx2

    return _httpx2_transport()(limits or httpx2.Limits(max_connections=1000, max_keepalive_connections=100))
