"""Log set-up: one line per event, as text or JSON, with secrets masked (`secrecy.mask_text`)."""

from __future__ import annotations

import json
import logging
import sys
import time

from agentkb.secrecy import mask_text


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in ("request_id", "method", "path", "status", "duration_ms"):
            if hasattr(record, key):
                payload[key] = getattr(record, key)
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload)


class MaskingFormatter(logging.Formatter):
    """Formats with `inner`, then masks secrets in the whole line (message, arguments and traceback)."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        return mask_text(self.inner.format(record))


def configure(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    inner = (
        JsonFormatter()
        if fmt == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    handler.setFormatter(MaskingFormatter(inner))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
