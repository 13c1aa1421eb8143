"""Provider credentials from the environment, given only to the provider they belong to."""

from __future__ import annotations

import os

OPENAI_HOST = "api.openai.com"


def openai_env_key(base_url: str | None) -> str | None:
    """`OPENAI_API_KEY` for OpenAI itself (no base_url, or one on api.openai.com); never for another
    server named by `base_url`."""
    if base_url is None or OPENAI_HOST in base_url:
        return os.environ.get("OPENAI_API_KEY") or None
    return None
