"""The Gemini API (`provider = 'google'` or `'gemini'`): `{base}/models/{model}:{method}` with the key in
`x-goog-api-key`. MindsDB's parameters: `model_name`, `api_key` (its google-genai client); agentkb also
reads `base_url` (default Google's). `GEMINI_API_KEY` / `GOOGLE_API_KEY` from the environment go only to
Google's host."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from agentkb.credentials import url_host
from agentkb.kb.apis.names import environment, http_url, required, text

BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
HOST = "generativelanguage.googleapis.com"
ENV_KEYS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")


@dataclass(frozen=True, slots=True)
class GeminiAPI:
    base_url: str
    api_key: str

    def url(self, model: str, method: str) -> str:
        """`method` (`batchEmbedContents`, `generateContent`) of `model` (`models/` prefix or not)."""
        return f"{self.base_url}/{model_path(model)}:{method}"

    def headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self.api_key}


def model_path(model: str) -> str:
    """`models/<name>`, the name quoted (a model given as `models/<name>` keeps its one prefix)."""
    return f"models/{quote(model.removeprefix('models/'), safe='')}"


def api(config: Mapping[str, Any], field: str) -> GeminiAPI:
    base_url = http_url(text(config, "base_url") or BASE_URL, field)
    key = text(config, "api_key", "google_api_key", "gemini_api_key")
    if key is None and url_host(base_url) == HOST:
        key = environment(*ENV_KEYS)
    if key is None:
        raise required(field, "api_key", "google", f"a Gemini API key, or {' / '.join(ENV_KEYS)}")
    return GeminiAPI(base_url, key)
