"""ASGI middleware: request ids, access logs, the request-body size limit, and the read-your-writes header
(`X-Agentkb-Read-Your-Writes: true|false`: the request's reads of a read replica see this process's
writes; unset, `AGENTKB_READ_YOUR_WRITES` decides)."""

from __future__ import annotations

import logging
import os
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentkb.api.responses import Problem, unexpected
from agentkb.service.platform import READ_YOUR_WRITES_HEADER, reading_your_writes

log = logging.getLogger("agentkb.access")
FORM_OVERHEAD = 64 * 1024


class RequestContext:
    """Gives each request an id (`X-Request-Id`), logs it, and refuses bodies over `max_body_bytes` (413):
    at once when `Content-Length` says so; otherwise (a chunked body) as soon as more than that has
    arrived — the app then reads the end of the body (`http.disconnect`) and whatever it answers is
    replaced by the 413."""

    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int,
        max_upload_bytes: int | None = None,
        max_import_bytes: int | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_upload_bytes = max_upload_bytes if max_upload_bytes is not None else max_body_bytes
        self.max_import_bytes = max_import_bytes if max_import_bytes is not None else max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = os.urandom(8).hex()  # 16 hex digits, as uuid4().hex[:16] gave, in a fifth of its time
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        status = 500
        response_started = False
        too_large = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if too_large and not response_started:
                return  # the app's answer to a body cut short; the 413 is sent instead
            if message["type"] == "http.response.start":
                status = message["status"]
                response_started = True
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            await send(message)

        # an upload's multipart body is the file plus its form fields and boundaries
        path: str = scope["path"]
        if path.startswith("/api/files"):
            limit = self.max_upload_bytes + FORM_OVERHEAD
        elif path.endswith("/knowledge_bases/import"):  # a knowledge base's export file
            limit = self.max_import_bytes + FORM_OVERHEAD
        else:
            limit = self.max_body_bytes
        try:
            declared = _content_length(scope)
            if declared is not None and declared > limit:
                await self._too_large(scope, receive, send_with_id, limit)
                return
            received = 0

            async def counting_receive() -> Message:
                nonlocal received, too_large
                if too_large:
                    return {"type": "http.disconnect"}
                message = await receive()
                if message["type"] == "http.request":
                    received += len(message.get("body", b""))
                    if received > limit:
                        too_large = True
                        return {"type": "http.disconnect"}
                return message

            wanted = _flag(scope, READ_YOUR_WRITES_HEADER.encode())
            if isinstance(wanted, str):
                await Problem(
                    400,
                    "Invalid header",
                    f"{READ_YOUR_WRITES_HEADER} must be true or false",
                )(scope, receive, send_with_id)
                return
            try:
                with reading_your_writes(wanted):
                    await self.app(scope, counting_receive, send_with_id)
            except Exception as exc:
                if too_large:
                    pass
                elif response_started:  # the answer is cut short: the server closes the connection
                    raise
                else:  # answered here, not re-raised: the client's connection stays open for its next request
                    await unexpected(request_id, exc)(scope, receive, send_with_id)
            if too_large and not response_started:
                too_large = False  # let the 413 through
                await self._too_large(scope, receive, send_with_id, limit)
        finally:
            log.info(
                "%s %s %s %.1fms",
                scope["method"],
                scope["path"],
                status,
                (time.perf_counter() - started) * 1000,
                extra={
                    "request_id": request_id,
                    "method": scope["method"],
                    "path": scope["path"],
                    "status": status,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                    # as a trusted proxy's X-Forwarded-For gives it (AGENTKB_TRUSTED_PROXIES), else the peer
                    "client": client[0] if (client := scope.get("client")) else None,
                },
            )

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        response = Problem(
            413, "Payload too large", f"The request body is larger than the limit of {limit} bytes"
        )
        response.headers["Connection"] = "close"  # the rest of the body is not read
        await response(scope, receive, send)


def _flag(scope: Scope, name: bytes) -> bool | None | str:
    """A true/false header's value: None when absent, "invalid" when it is neither."""
    for header, value in scope.get("headers", []):
        if header.lower() == name:
            text = value.decode("latin-1").strip().lower()
            if text in ("true", "1", "yes", "on"):
                return True
            if text in ("false", "0", "no", "off"):
                return False
            return "invalid"
    return None


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
