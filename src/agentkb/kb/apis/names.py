"""KB model providers: MindsDB's names and spellings, and the values every provider module reads."""

from __future__ import annotations

import os

from agentkb.credentials import first_text, url_host
from agentkb.destinations import check_url
from agentkb.errors import BadRequest

OPENAI = "openai"
OLLAMA = "ollama"
AZURE = "azure_openai"
GEMINI = "gemini"
BEDROCK = "bedrock"
SNOWFLAKE = "snowflake"
# MindsDB's provider names (`google` is its spelling of Gemini; its docs also say `openai_azure`)
ALIASES = {
    "openai": OPENAI,
    "ollama": OLLAMA,
    "azure_openai": AZURE,
    "openai_azure": AZURE,
    "google": GEMINI,
    "gemini": GEMINI,
    "bedrock": BEDROCK,
    "snowflake": SNOWFLAKE,
}
OPENAI_BASE_URL = "https://api.openai.com/v1"
OLLAMA_BASE_URL = "http://127.0.0.1:11434/v1"


def canonical(provider: object, field: str) -> str:
    """The provider's canonical name (`google` → `gemini`, ...); 400 naming the supported ones."""
    found = ALIASES.get(provider) if isinstance(provider, str) else None
    if found is None:
        raise BadRequest(
            f"'{field}.provider' {provider!r} is not supported; use one of: {', '.join(sorted(ALIASES))}",
            title=f"Invalid {field.replace('_', ' ')}",
        )
    return found


text = first_text  # the first non-empty string among `config[keys]` (the credentials' own rule)


def environment(*names: str) -> str | None:
    """The first non-empty environment variable among `names`."""
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


def http_url(url: str, field: str, key: str = "base_url") -> str:
    """`url` without a trailing slash, when it is an http(s) URL with a host this server may call; 400
    otherwise."""
    if not url.startswith(("http://", "https://")) or url_host(url) is None:
        raise BadRequest(
            f"'{field}.{key}' must be an http(s) URL with a host, got {url!r}",
            title=f"Invalid {field.replace('_', ' ')}",
        )
    check_url(url, f"{field}.{key}")  # an IP literal: no resolver sees it
    return url.rstrip("/")


def required(field: str, key: str, provider: str, what: str) -> BadRequest:
    return BadRequest(
        f"'{field}.{key}' is required for provider {provider} ({what})",
        title=f"Invalid {field.replace('_', ' ')}",
    )
