"""Log set-up: one line per event, as text or JSON, with secrets masked (`secrecy.mask_text`).

Masking happens once per record: `mask_records` makes every log record of the process carry a masked
message, traceback and stack whatever handler writes it (the runtime installs it, so an app served by
another program's logging set-up is covered too) and marks it masked; `configure`'s formatter masks a
finished line only when its record was not (one made before the factory was installed)."""

from __future__ import annotations

import json
import logging
import sys
import time
import traceback
from typing import Any

from agentkb.secrecy import mask_text

MASKED = "agentkb_masked"  # set on a record whose message, traceback and stack are masked


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in ("request_id", "method", "path", "status", "duration_ms", "client"):
            if hasattr(record, key):
                value = getattr(record, key)
                payload[key] = mask_text(value) if isinstance(value, str) else value
        if record.exc_info:
            payload["exc"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(payload)


class MaskingFormatter(logging.Formatter):
    """Formats with `inner`, then masks secrets in the whole line (message, arguments and traceback)."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        line = self.inner.format(record)
        return line if getattr(record, MASKED, False) else mask_text(line)


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
        if record.stack_info:
            record.stack_info = mask_text(record.stack_info)
        setattr(record, MASKED, True)
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
    # httpx logs every request it sends (embeddings, LLM calls) at INFO: only at DEBUG here, where the
    # access log's one line per request of ours is the INFO record
    for name in ("httpx", "httpx2"):  # httpx2: the OpenAI and Anthropic SDKs' client
        logging.getLogger(name).setLevel(logging.DEBUG if level.upper() == "DEBUG" else logging.WARNING)
