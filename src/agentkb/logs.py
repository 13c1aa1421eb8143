"""Log set-up: one line per event, as text or JSON, with secrets masked (`secrecy.mask_text`).

Masking happens twice: `mask_records` makes every log record of the process carry a masked message and
traceback whatever handler writes it (the runtime installs it, so an app served by another program's
logging set-up is covered too), and `configure`'s formatter masks each finished line."""

from __future__ import annotations

import json
import logging
import sys
import time
import traceback
from typing import Any

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
            payload["exc"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(payload)


class MaskingFormatter(logging.Formatter):
    """Formats with `inner`, then masks secrets in the whole line (message, arguments and traceback)."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        return mask_text(self.inner.format(record))


def mask_records() -> None:
    """Install (once) a log-record factory that masks each record's message and traceback."""
    base = logging.getLogRecordFactory()
    if getattr(base, "agentkb_masking", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = base(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logging's to report, not ours
            return record
        masked = mask_text(message)
        if masked != message:
            record.msg, record.args = masked, ()
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
            record.exc_text = mask_text(text)
        return record

    factory.agentkb_masking = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


def configure(level: str, fmt: str) -> None:
    mask_records()
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
