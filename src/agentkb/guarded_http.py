"""HTTP clients for model servers that connect only to addresses `destinations` allows, checked when each
connection is opened (not when the model was stored), and dialled as checked (no second lookup).

- aiohttp (the embedders): `GuardedResolver`, the connector's resolver (aiohttp's `resolver=` extension
  point). aiohttp does not resolve an IP-literal host, so the embedders check their URL too
  (`destinations.check_url`).
- httpx (the reranker) and httpx2 (the agents' LLM providers): a transport whose connection pool dials
  through a network backend that resolves the host with `destinations.allowed_addresses` and connects to
  those addresses (httpcore's `network_backend=` extension point); TLS still verifies the URL's host name.
  Neither library's transport takes a network backend, so `GuardedTransport` builds the transport's pool
  (`_pool`, the one attribute its requests go through) with one. Environment proxies are not used by these
  two clients: a proxy would resolve the name itself.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
from typing import Any

import aiohttp
import aiohttp.abc
import httpcore
import httpcore2
import httpx
import httpx2

from agentkb.destinations import allowed_addresses

__all__ = ["GuardedResolver", "guarded_httpx2_transport", "guarded_httpx_client"]


class GuardedResolver(aiohttp.abc.AbstractResolver):
    """aiohttp's resolver, answering only with allowed addresses (DestinationRefused otherwise)."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        addresses = await asyncio.to_thread(allowed_addresses, host, port, "model server")
        wanted = [a for a in addresses if family == socket.AF_UNSPEC or _family(a.version) == family]
        return [
            aiohttp.abc.ResolveResult(
                hostname=host, host=str(a), port=port, family=_family(a.version), proto=0, flags=0
            )
            for a in wanted or addresses
        ]

    async def close(self) -> None:
        return None


def _family(version: int) -> socket.AddressFamily:
    return socket.AF_INET6 if version == 6 else socket.AF_INET


async def _dial(inner: Any, retry: tuple[type[Exception], ...], host: str, port: int, *args: Any) -> Any:
    """Connect `inner` (an httpcore or httpcore2 backend) to the allowed addresses of `host` in turn, the next
    when one fails with `retry`'s errors."""
    addresses = await asyncio.to_thread(allowed_addresses, host.strip("[]"), port, "model server")
    failure: Exception | None = None
    for address in addresses:
        try:
            return await inner.connect_tcp(str(address), port, *args)
        except retry as exc:
            failure = exc
    assert failure is not None
    raise failure


_RETRY = (httpcore.ConnectError, httpcore.ConnectTimeout, OSError)
_RETRY2 = (httpcore2.ConnectError, httpcore2.ConnectTimeout, OSError)


class _Backend(httpcore.AsyncNetworkBackend):
    def __init__(self) -> None:
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream: httpcore.AsyncNetworkStream = await _dial(
            self.inner, _RETRY, host, port, timeout, local_address, socket_options
        )
        return stream

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("model servers are not reached over unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _Backend2(httpcore2.AsyncNetworkBackend):
    def __init__(self) -> None:
        self.inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        stream: httpcore2.AsyncNetworkStream = await _dial(
            self.inner, _RETRY2, host, port, timeout, local_address, socket_options
        )
        return stream

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("model servers are not reached over unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _GuardedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, limits: httpx.Limits) -> None:
        super().__init__(trust_env=False, limits=limits)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_Backend(),
        )


class _GuardedTransport2(httpx2.AsyncHTTPTransport):
    def __init__(self, limits: httpx2.Limits) -> None:
        super().__init__(trust_env=False, limits=limits)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_Backend2(),
        )


def guarded_httpx_client() -> httpx.AsyncClient:
    """An httpx client (httpx's default limits) whose connections go only to allowed addresses."""
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
    return httpx.AsyncClient(transport=_GuardedTransport(limits), trust_env=False)


def guarded_httpx2_transport(limits: httpx2.Limits | None = None) -> httpx2.AsyncHTTPTransport:
    """An httpx2 transport whose connections go only to allowed addresses (for `create_async_httpx2_client`)."""
    return _GuardedTransport2(limits or httpx2.Limits(max_connections=1000, max_keepalive_connections=100))
