"""Where a knowledge base's models send their requests, and with them its keys: each model's endpoint, shown
by an import (its answer, a missing-secret error, `agentkb import`) so that the operator sees where the
keys they give will go, and checked before an imported definition is stored (an http(s) URL with a host,
never a link-local or cloud-metadata address)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from agentkb.destinations import DestinationRefused, check_host
from agentkb.errors import BadRequest
from agentkb.kb.apis import aws, azure, gemini, names, snowflake
from agentkb.kb.embedders import config as embedding_config

MODEL_KEYS = ("embedding_model", "reranking_model")
LOCAL = "local"  # computed in this process: no request, no key
DEFAULT_URLS = {"openai": names.OPENAI_BASE_URL, "ollama": names.OLLAMA_BASE_URL}


def endpoint(key: str, model: Mapping[str, Any]) -> str:
    """The URL model `key` (`embedding_model` or `reranking_model`) is called at, or `local`."""
    provider = str(model.get("provider") or "openai")
    found = names.ALIASES.get(provider)
    if found == names.AZURE:
        return azure.endpoint(model) or ""
    if found == names.GEMINI:
        return str(model.get("base_url") or gemini.BASE_URL)
    if found == names.BEDROCK:
        given = model.get("base_url") or model.get("endpoint_url")
        return str(given or aws.default_url(aws.region(model) or "us-east-1"))
    if found == names.SNOWFLAKE:
        account = snowflake.account(model)
        return str(model.get("base_url") or (snowflake.default_url(account) if account else ""))
    url = model.get("base_url")
    if url is not None:
        return str(url)
    if key == "embedding_model" and found is None:
        try:
            if embedding_config.kind(dict(model)) == embedding_config.LOCAL:
                return LOCAL
        except KeyError:
            pass  # an unknown provider: refused when the model is first used
    return DEFAULT_URLS.get(provider, DEFAULT_URLS["openai"])


def endpoints(definition: Mapping[str, Any]) -> dict[str, str]:
    """Each model of a KB definition and its endpoint."""
    return {
        key: endpoint(key, model)
        for key in MODEL_KEYS
        if isinstance(model := definition.get(key), Mapping) and model
    }


def check_endpoint(field: str, url: str) -> None:
    """400 unless `url` is `local` or an http(s) URL with a host that is not link-local or metadata."""
    if url == LOCAL:
        return
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:
        parts, host = None, ""
    if parts is None or parts.scheme not in ("http", "https") or not host:
        raise BadRequest(
            f"'{field}.base_url' must be an http(s) URL with a host, got {url!r}", title="Invalid endpoint"
        )
    try:  # the destination policy's rule (link-local and cloud-metadata hosts), under this check's title
        check_host(host, f"'{field}.base_url' {url!r}")
    except DestinationRefused as exc:
        raise BadRequest(exc.detail, title="Invalid endpoint") from None


def check_endpoints(definition: Mapping[str, Any]) -> dict[str, str]:
    """The definition's endpoints (`endpoints`), each checked (`check_endpoint`)."""
    found = endpoints(definition)
    for field, url in found.items():
        check_endpoint(field, url)
    return found


def describe(found: Mapping[str, str]) -> str:
    """`embedding_model → https://…, reranking_model → local` for messages."""
    return ", ".join(f"{field} → {url}" for field, url in found.items())
