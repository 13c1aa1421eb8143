"""The console's session: a login cookie that stands for the API's credential, and CSRF protection.

`ConsoleSession` runs before the API's `Authenticate` middleware, for `/console` paths only:

- the session cookie (HttpOnly, SameSite=Strict, Secure over https — the scheme as a trusted proxy's
  `X-Forwarded-Proto` gives it, see `AGENTKB_TRUSTED_PROXIES`) holds a session token from the auth service:
  a login's, or one standing for an API key given on the login form (never the key itself), which logging
  out deletes; it is handed on as `Authorization: Bearer <token>`, so
  the console is checked by the same middleware, against the same sessions and keys, as the API;
- a refusal (401) of a console page becomes a redirect to the login form (and the stale cookie is
  cleared), so a person sees a form, not a problem+json;
- every console request gets a CSRF token (a random value in a SameSite=Strict cookie of its own); each
  POST must send it back, as the form field `csrf_token` or the header `X-CSRF-Token` (`check_csrf`).
"""

from __future__ import annotations

import hmac
import secrets
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import quote

from fastapi import Request
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentkb.errors import AgentKBError

PREFIX = "/console"
LOGIN_PATH = f"{PREFIX}/login"
SESSION_COOKIE = "agentkb_console"
CSRF_COOKIE = "agentkb_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class CsrfRefused(AgentKBError):
    status = 403
    title = "Forbidden"


def is_console(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def _cookies(scope: Scope) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # noqa: BLE001 - a malformed cookie header is no cookie
                return {}
    return {key: morsel.value for key, morsel in jar.items()}


def cookie_header(name: str, value: str, *, secure: bool, max_age: int | None = None) -> str:
    """A `Set-Cookie` value: HttpOnly, SameSite=Strict, scoped to the console; `max_age=0` deletes it."""
    parts = [f"{name}={value}", f"Path={PREFIX}", "HttpOnly", "SameSite=Strict"]
    if max_age is not None:
        parts.append(f"Max-Age={max_age}")
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def is_https(scope: Scope) -> bool:
    return scope.get("scheme") == "https"


def safe_next(target: str | None) -> str:
    """Where to go after logging in: a console path only (never another site)."""
    if target and is_console(target.split("?", 1)[0]) and not target.startswith("//"):
        return target
    return PREFIX


class ConsoleSession:
    """See the module docstring. Added to the app after `Authenticate`, so it runs before it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_console(scope["path"]):
            await self.app(scope, receive, send)
            return
        cookies = _cookies(scope)
        headers = list(scope.get("headers", []))
        token = cookies.get(SESSION_COOKIE)
        if token and not any(name == b"authorization" for name, _ in headers):
            headers.append((b"authorization", f"Bearer {token}".encode("latin-1", errors="replace")))
        csrf = cookies.get(CSRF_COOKIE) or ""
        new_csrf = len(csrf) < 20
        if new_csrf:
            csrf = secrets.token_urlsafe(24)
        scope = {**scope, "headers": headers}
        scope.setdefault("state", {})["console_csrf"] = csrf
        secure = is_https(scope)
        refused = False

        async def send_console(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start":
                if message["status"] == 401 and scope["path"] != LOGIN_PATH:
                    refused = True
                    await send(_to_login(scope, secure))
                    return
                out = MutableHeaders(scope=message)
                if new_csrf:
                    out.append("set-cookie", cookie_header(CSRF_COOKIE, csrf, secure=secure))
                out.setdefault("cache-control", "no-store")
            elif refused:  # the refusal's body is replaced by the redirect's (empty)
                if not message.get("more_body", False):
                    await send({"type": "http.response.body", "body": b""})
                return
            await send(message)

        await self.app(scope, receive, send_console)


def _to_login(scope: Scope, secure: bool) -> dict[str, Any]:
    query = scope.get("query_string", b"").decode("latin-1")
    wanted = scope["path"] + (f"?{query}" if query else "")
    location = f"{LOGIN_PATH}?next={quote(wanted, safe='')}"
    headers = MutableHeaders(raw=[(b"location", location.encode("latin-1")), (b"content-length", b"0")])
    headers.append("set-cookie", cookie_header(SESSION_COOKIE, "", secure=secure, max_age=0))
    return {"type": "http.response.start", "status": 303, "headers": headers.raw}


def csrf_token(request: Request) -> str:
    token: str = request.scope.get("state", {}).get("console_csrf", "")
    return token


async def check_csrf(request: Request) -> None:
    """A dependency of every console POST: the request must carry the page's CSRF token (SameSite=Strict
    already keeps other sites' requests from carrying the cookies)."""
    if request.method in SAFE_METHODS:
        return
    expected = csrf_token(request)
    given = request.headers.get(CSRF_HEADER)
    if given is None and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        value = (await request.form()).get(CSRF_FIELD)
        given = value if isinstance(value, str) else None
    if not expected or not given or not hmac.compare_digest(given.encode(), expected.encode()):
        raise CsrfRefused("The form is out of date or did not come from this console: reload the page")
