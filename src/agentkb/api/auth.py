"""Authentication over HTTP: `POST /api/login`, `POST /api/logout`, and the middleware that refuses a
request without a valid credential (401: problem+json with `WWW-Authenticate: Bearer`, OpenAI's
error shape under `/v1/`).

A credential is `Authorization: Bearer <login token or API key>` (what mindsdb_sdk sends after
`connect(url, login=, password=)`) or `X-Api-Key: <API key>` (what it sends for `connect(url, api_key=)`).
The middleware runs before the route reads the body, so an unauthenticated upload is refused unread.
Requests for the public paths (health, `/api/status`, `/api/login`, the API docs) and requests that match
no route (they answer 404, as mindsdb_sdk's login fallback from `/cloud/login` needs) pass unchecked.
A refused credential counts against the client address in the login throttle; while the address is blocked
its credentials get 429 with `Retry-After` before they are looked up (`service.platform.login_throttle`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from pydantic import BaseModel, ConfigDict
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from agentkb.api import docs as api_docs
from agentkb.api.deps import ServicesDep
from agentkb.api.openai_compat import OPENAI_PREFIX, openai_error
from agentkb.api.responses import JSON, Problem, problems
from agentkb.errors import TooManyRequests
from agentkb.service.platform import entered
from agentkb.service.types import Principal

router = APIRouter(prefix="/api", tags=["auth"])

HEALTH_PATHS = frozenset({"/health", "/health/ready"})
PUBLIC_PATHS = HEALTH_PATHS | {"/api/status", "/api/login"}
MISSING = (
    "Authorization is required to complete the request: send `Authorization: Bearer <token or API key>` "
    "(a token from POST /api/login) or `X-Api-Key: <API key>`"
)
INVALID = "The credential is invalid, expired or revoked: log in again or use a valid API key"


class LoginRequest(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"username": "admin", "password": "s3cret"}]})
    username: str | None = None
    password: str | None = None


class LoginAnswer(BaseModel):
    token: str
    expires_in: float


def credential(headers: Any) -> str | None:
    """The credential a request carries: a Bearer token, else an `X-Api-Key` header."""
    authorization = headers.get("authorization")
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return str(value.strip())
    api_key = headers.get("x-api-key")
    return str(api_key.strip()) if api_key and api_key.strip() else None


def unauthorized(detail: str, *, invalid: bool = False) -> Problem:
    response = Problem(401, "Unauthorized", detail)
    response.headers["WWW-Authenticate"] = 'Bearer error="invalid_token"' if invalid else "Bearer"
    return response


def refusal(path: str, detail: str, *, invalid: bool = False) -> Response:
    """The 401 for a request to `path`: OpenAI's error shape under `/v1/` (what OpenAI clients read), else
    problem+json."""
    if not path.startswith(OPENAI_PREFIX):
        return unauthorized(detail, invalid=invalid)
    response = openai_error(401, detail)
    response.headers["WWW-Authenticate"] = 'Bearer error="invalid_token"' if invalid else "Bearer"
    return response


def too_many(path: str, refused: TooManyRequests) -> Response:
    """The login throttle's 429 for a request to `path` (OpenAI's error shape under `/v1/`)."""
    if path.startswith(OPENAI_PREFIX):
        response: Response = openai_error(429, refused.detail)
    else:
        response = Problem(429, refused.title, refused.detail)
    response.headers["Retry-After"] = str(refused.retry_after_s)
    return response


def principal(request: Request) -> Principal | None:
    """Who the request acts for (set by the middleware); None when auth is off."""
    found: Principal | None = getattr(request.state, "principal", None)
    return found


@router.post("/login", response_model=LoginAnswer, responses=problems(400, 401, 413, 429))
async def login(body: LoginRequest, request: Request, services: ServicesDep) -> Any:
    """MindsDB's login: a token to send as `Authorization: Bearer <token>` until it expires. Failed logins
    are throttled per user name and per client address: 429 with `Retry-After` while either is blocked."""
    client = request.client.host if request.client else None
    token = await services.auth.login(body.username, body.password, client)
    ttl = token.expires_in_s
    return JSON({"token": token.token, "expires_in": int(ttl) if ttl.is_integer() else ttl})


@router.post("/logout", response_model=str, responses=problems(400, 413))
async def logout(request: Request, services: ServicesDep) -> Any:
    """End the session of the login token sent (an API key is revoked with `agentkb keys revoke`)."""
    await services.auth.logout(credential(request.headers))
    return JSON("")


def public_paths(app: FastAPI) -> frozenset[str]:
    """The paths open without a credential: health, status, login, and the API's docs and schema."""
    docs = {app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url}
    return PUBLIC_PATHS | api_docs.PATHS | {path for path in docs if path}


SECURITY_SCHEMES = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "A login token from `POST /api/login`, or an API key (`agentkb keys create NAME`).",
    },
    "apiKey": {"type": "apiKey", "in": "header", "name": "X-Api-Key", "description": "An API key."},
}
UNAUTHORIZED_RESPONSE = {
    "description": "No valid credential (when authentication is on): problem+json, `WWW-Authenticate: Bearer`.",
    "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
}
THROTTLED_RESPONSE = {
    "description": "The credential came from a client address the login throttle has blocked after too many "
    "invalid credentials: problem+json, `Retry-After` (seconds).",
    "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
}
FORBIDDEN_RESPONSE = {
    "description": "The API key's scope does not allow the request (a read-only key writing, a project key "
    "naming another project or a global object): problem+json.",
    "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
}

HOST_REFUSED_RESPONSE = {
    "description": "The Host header names no host this server answers to (with authentication off: localhost, "
    "loopback addresses and AGENTKB_ALLOWED_HOSTS; the guard against DNS rebinding, api/hosts.py): problem+json.",
    "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
}


def document_security(app: FastAPI) -> None:
    """Declare the credentials in `/openapi.json` (Swagger UI's Authorize button uses them): every operation
    outside the public paths takes a Bearer token or an X-Api-Key and may answer 401, 403 (a scoped key) and 429
    (the login throttle's); every one but the health probes may answer 400 to a Host header the server does not
    answer to (`TrustedHosts`), unless it documents a 400 of its own."""
    build = app.openapi
    public = public_paths(app)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        components = schema.setdefault("components", {})
        components["securitySchemes"] = SECURITY_SCHEMES
        components.setdefault("schemas", {}).setdefault(
            "Problem",
            {
                "type": "object",
                "properties": {"title": {"type": "string"}, "detail": {"type": "string"}},
                "required": ["title", "detail"],
            },
        )
        for path, operations in schema.get("paths", {}).items():
            if path not in HEALTH_PATHS:
                for operation in operations.values():
                    operation.setdefault("responses", {}).setdefault("400", HOST_REFUSED_RESPONSE)
            if path in public:
                continue
            for operation in operations.values():
                operation["security"] = [{"bearer": []}, {"apiKey": []}]
                operation.setdefault("responses", {}).setdefault("401", UNAUTHORIZED_RESPONSE)
                operation["responses"].setdefault("429", THROTTLED_RESPONSE)
                operation["responses"].setdefault("403", FORBIDDEN_RESPONSE)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _routed(scope: Scope) -> bool:
    """Whether the request matches a route (by path: a wrong method still needs a credential)."""
    return any(route.matches(scope)[0] is not Match.NONE for route in scope["app"].router.routes)


class Authenticate:
    """Sets `request.state.principal`; refuses (401) a protected route without a valid credential."""

    def __init__(self, app: ASGIApp, public: frozenset[str]) -> None:
        self.app = app
        self.public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.public:
            await self.app(scope, receive, send)
            return
        auth = scope["app"].state.services.auth
        server = scope.get("server")
        auth.observe(server[0] if server else None)  # reached at a non-loopback address: exposed
        given = credential(_Headers(scope))
        client = scope["client"][0] if scope.get("client") else None
        # the login throttle: a blocked client address's credentials are refused before they are looked up
        wait = auth.throttle.refused(client, given) if given else None
        if wait is not None:
            await too_many(scope["path"], auth.throttle.refusal(wait))(scope, receive, send)
            return
        found = await auth.authenticate(given) if given else None
        if found is not None:
            auth.throttle.trust(given)
        # route matching (an unknown path answers its 404) only when the request would be refused: with auth
        # off it costs nothing per request
        if found is None and await auth.enabled() and _routed(scope):
            wait = await auth.throttle.credential_failed(client) if given else None
            if wait is not None:
                await too_many(scope["path"], auth.throttle.refusal(wait))(scope, receive, send)
                return
            answer = refusal(scope["path"], INVALID if given else MISSING, invalid=given is not None)
            await answer(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = found
        with entered(found):  # the services check the principal's scope (read-only, projects)
            await self.app(scope, receive, send)


class _Headers:
    """Case-insensitive `get` over the raw ASGI headers (without building a Request)."""

    def __init__(self, scope: Scope) -> None:
        self.raw: list[tuple[bytes, bytes]] = scope.get("headers", [])

    def get(self, name: str) -> str | None:
        key = name.encode()
        for header, value in self.raw:
            if header.lower() == key:
                return value.decode("latin-1")
        return None
