"""The error hierarchy. Every error reaches clients as `application/problem+json` `{"title", "detail"}`.

AgentKBError (500)
 ├── BadRequest (400)          malformed body, field, SQL or file
 ├── Unauthorized (401)        no credential, or one that is invalid, expired or revoked
 ├── Forbidden (403)           a valid credential whose scope does not cover the request (API key scopes)
 ├── NotFound (404)            unknown project, agent, knowledge base, data source, ...
 ├── Conflict (409)            a name that already exists; deleting a non-empty project
 ├── PayloadTooLarge (413)     request body over `max_body_bytes`
 ├── TooManyRequests (429)     too many failed logins or invalid credentials (`Retry-After`)
 ├── UpstreamError (502)       an embedding or LLM provider failed
 └── Unavailable (503)         try again shortly (`Retry-After`): an insert cut off by a database failover
"""

from __future__ import annotations


class AgentKBError(Exception):
    status: int = 500
    title: str = "Internal error"

    def __init__(self, detail: str, *, title: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if title is not None:
            self.title = title


class BadRequest(AgentKBError):
    status = 400
    title = "Bad request"


class Unauthorized(AgentKBError):
    status = 401
    title = "Unauthorized"


class Forbidden(AgentKBError):
    status = 403
    title = "Forbidden"


class NotFound(AgentKBError):
    status = 404
    title = "Not found"


class Conflict(AgentKBError):
    status = 409
    title = "Conflict"


class PayloadTooLarge(AgentKBError):
    status = 413
    title = "Payload too large"


class TooManyRequests(AgentKBError):
    """Refused for now; `retry_after_s` (whole seconds, at least 1) is sent as `Retry-After`."""

    status = 429
    title = "Too many requests"

    def __init__(self, detail: str, *, retry_after_s: int, title: str | None = None) -> None:
        super().__init__(detail, title=title)
        self.retry_after_s = max(1, retry_after_s)


class UpstreamError(AgentKBError):
    status = 502
    title = "Upstream provider error"


class Unavailable(AgentKBError):
    """Not now; the same request may succeed `retry_after_s` later (sent as `Retry-After`)."""

    status = 503
    title = "Service unavailable"

    def __init__(self, detail: str, *, retry_after_s: int, title: str | None = None) -> None:
        super().__init__(detail, title=title)
        self.retry_after_s = max(1, retry_after_s)


def project_not_found(name: str) -> NotFound:
    return NotFound(f"Project with name {name} does not exist", title="Project not found")


def agent_not_found(name: str) -> NotFound:
    return NotFound(f"Agent with name {name} does not exist", title="Agent not found")


def kb_not_found(name: str) -> NotFound:
    return NotFound(f"Knowledge Base with name {name} does not exist", title="Knowledge Base not found")
