"""MindsDB's timestamp text, `YYYY-MM-DD HH:MM:SS.ffffff` in UTC, used by every record agentkb returns."""

from __future__ import annotations

from datetime import UTC, datetime


def timestamp(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def optional_timestamp(value: datetime | None) -> str | None:
    return timestamp(value) if value is not None else None
