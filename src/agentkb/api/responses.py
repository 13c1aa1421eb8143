"""JSON responses: compact orjson for success (as MindsDB), problem+json for errors."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import JSONResponse

from agentkb.secrecy import mask_text


class JSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class Problem(JSONResponse):
    """An error answer; its detail never shows a secret (`secrecy.mask_text`)."""

    media_type = "application/problem+json"

    def __init__(self, status: int, title: str, detail: str, **extra: Any) -> None:
        super().__init__({"title": title, "detail": mask_text(detail), **extra}, status_code=status)

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
