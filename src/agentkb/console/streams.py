"""Server-sent events for the console's live parts (an agent's run, a job's progress): each item is one
`data: <json>` event, sent with the same lifecycle and headers as the API's streams (`service.platform.streams`): a
stream ends early, without waiting for its next item, when the server shuts down."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import StreamingResponse

from agentkb.service.platform import HEADERS, MEDIA_TYPE, data


def encode(obj: dict[str, Any]) -> str:
    return data(obj, default=str)


def sse_stream(chunks: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(chunks, media_type=MEDIA_TYPE, headers=HEADERS)
