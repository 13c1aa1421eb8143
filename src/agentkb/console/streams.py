"""Server-sent events for the console's live parts (an agent's run, a job's progress): each item is one
`data: <json>` event; a stream ends early, without waiting for its next item, when the server shuts down
(`service.platform.lifecycle.until`)."""

from __future__ import annotations

import json
from typing import Any

SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def encode(obj: dict[str, Any]) -> str:
    return f"data: {json.dumps(obj, default=str)}\n\n"
