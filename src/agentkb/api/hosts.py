"""The Host header check, a guard against DNS rebinding: `TrustedHosts` refuses (400 problem+json, "Invalid
host header") a request whose `Host` is not a name this server answers to.

A web page the operator opens can make the browser send requests to a name its author controls and then
re-point that name at 127.0.0.1: the browser takes them for same-origin requests to the page's own site,
but they reach the local agentkb, with the attacker's name in `Host`. So:

- localhost and loopback addresses (`localhost`, 127.0.0.0/8, `[::1]`, any port) are always answered;
- the names of `AGENTKB_ALLOWED_HOSTS` are too: exact names, `*.example.com` (its subdomains), IP networks
  (`10.0.0.0/8`: a Host that is such an address), `*` (any Host);
- with `AGENTKB_ALLOWED_HOSTS` empty, a server with authentication on answers to any Host (its credentials
  protect it; a rebound page has none), one without authentication only to the loopback names above;
- the health probes (`/health`, `/health/ready`) answer whatever the Host: Kubernetes sends the pod's
  address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

from agentkb.api.responses import Problem
from agentkb.service.platform import AuthService, is_loopback

TITLE = "Invalid host header"
SHOWN = 100  # characters of a refused Host header quoted back


def host_name(header: str | None) -> str | None:
    """The host of a `Host` header without its port, lower case (`[::1]:8000` → `::1`); None if malformed."""
    if header is None:
        return None
    text = header.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or (text[end + 1 :] and not _port(text[end + 1 :])):
            return None
        name = text[1:end]
    else:
        name, colon, port = text.partition(":")
        if colon and not _port(colon + port):
            return None
    name = name.rstrip(".")
    if not name or any(c.isspace() or c in "/\\@?#" for c in name):
        return None
    return name


def _port(text: str) -> bool:
    return text.startswith(":") and text[1:].isdigit()


class HostPolicy:
    """The names of `AGENTKB_ALLOWED_HOSTS`: exact, `*.domain`, IP networks, or `*`."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.any = "*" in patterns
        self.names: set[str] = set()
        self.suffixes: list[str] = []
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for pattern in patterns:
            if pattern.startswith("*."):
                self.suffixes.append(pattern[1:])
                continue
            bare = pattern.strip("[]")
            try:
                self.networks.append(ipaddress.ip_network(bare, strict=False))
            except ValueError:
                self.names.add(bare)

    @property
    def configured(self) -> bool:
        return self.any or bool(self.names or self.suffixes or self.networks)

    def allows(self, host: str) -> bool:
        if self.any or host in self.names or any(host.endswith(s) for s in self.suffixes):
            return True
        if self.networks:
            try:
                address = ipaddress.ip_address(host)
            except ValueError:
                return False
            return any(address in network for network in self.networks)
        return False


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


class TrustedHosts:
    """See the module docstring. Runs before authentication; `exempt` paths (health probes) pass unchecked."""

    def __init__(self, app: ASGIApp, allowed: Sequence[str], exempt: frozenset[str]) -> None:
        self.app = app
        self.policy = HostPolicy(allowed)
        self.exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.policy.any or scope["path"] in self.exempt:
            await self.app(scope, receive, send)
            return
        auth: AuthService = scope["app"].state.services.auth
        server = scope.get("server")
        auth.observe(server[0] if server else None)
        header = _header(scope, b"host")
        host = host_name(header)
        if host is not None and (is_loopback(host) or self.policy.allows(host)):
            await self.app(scope, receive, send)
            return
        if host is not None and not self.policy.configured and await auth.enabled():
            await self.app(scope, receive, send)  # credentials protect a server with auth on
            return
        await self._refuse(header, scope, receive, send)

    async def _refuse(self, header: str | None, scope: Scope, receive: Receive, send: Send) -> None:
        if self.policy.configured:
            why = "it answers to localhost, loopback addresses and the names of AGENTKB_ALLOWED_HOSTS only"
        else:
            why = (
                "with authentication off it answers to localhost and loopback addresses only (a guard "
                "against DNS rebinding): add the name to AGENTKB_ALLOWED_HOSTS, or turn authentication on"
            )
        if header is None:
            detail = f"The request has no Host header; this server needs one: {why}"
        else:
            detail = f"The Host header {header[:SHOWN]!r} is not a name this server answers to: {why}"
        await Problem(400, TITLE, detail)(scope, receive, send)
