"""aiohttp's resolver for the embedders' connections: only addresses `destinations` allows (see the
package's docstring)."""

from __future__ import annotations

import asyncio
import socket

import aiohttp.abc

from agentkb.destinations import allowed_addresses


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
