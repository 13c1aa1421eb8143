"""Embedding-model configuration: provider names, defaults and known vector sizes."""

from __future__ import annotations

import importlib.util
from typing import Any

from agentkb.destinations import check_model_urls
from agentkb.errors import BadRequest
from agentkb.kb.apis import names
from agentkb.validation import check_dict

LOCAL = "local"
OPENAI = "openai"
AZURE = names.AZURE
GEMINI = names.GEMINI
BEDROCK = names.BEDROCK
SNOWFLAKE = names.SNOWFLAKE
OLLAMA_BASE_URL = names.OLLAMA_BASE_URL
# provider → the kind of embedder (`registry.embedder_kind`); MindsDB's names and a few more for local
_ALIASES = {
    "local": LOCAL,
    "sentence_transformers": LOCAL,
    "sentence-transformers": LOCAL,
    "huggingface": LOCAL,
    **{name: OPENAI if kind == names.OLLAMA else kind for name, kind in names.ALIASES.items()},
}
ENGINES = ("auto", "torch", "onnx")  # the local provider's engines (see local.py)
PRECISIONS = ("auto", "float32", "bfloat16")
KNOWN_DIMENSIONS = {
    (LOCAL, "all-minilm-l6-v2"): 384,
    (LOCAL, "sentence-transformers/all-minilm-l6-v2"): 384,
    (OPENAI, "text-embedding-3-small"): 1536,
    (OPENAI, "text-embedding-3-large"): 3072,
    (OPENAI, "text-embedding-ada-002"): 1536,
}


def normalize(given: Any, default: dict[str, Any]) -> dict[str, Any]:
    """The stored configuration: the default model with the user's fields over it (same provider),
    or the user's fields alone (another provider), as MindsDB merges `default_embedding_model`."""
    if given is None:
        config = dict(default)
    else:
        if isinstance(given, str):
            given = {"model_name": given}
        user = check_dict(given, "embedding_model")
        provider = user.get("provider", default.get("provider"))
        config = {**default, **user} if provider == default.get("provider") else dict(user)
    provider = config.get("provider")
    if provider not in _ALIASES:
        raise BadRequest(
            f"'embedding_model.provider' {provider!r} is not supported; use one of: {', '.join(sorted(_ALIASES))}",
            title="Invalid embedding model",
        )
    if provider == "ollama":
        config.setdefault("base_url", OLLAMA_BASE_URL)
    if not isinstance(config.get("model_name"), str) or not config["model_name"]:
        raise BadRequest("'embedding_model.model_name' is required", title="Invalid embedding model")
    dims = config.get("dimensions")
    if dims is not None and (not isinstance(dims, int) or isinstance(dims, bool) or not 0 < dims <= 4000):
        raise BadRequest(
            "'embedding_model.dimensions' must be an integer in 1..4000", title="Invalid embedding model"
        )
    if _ALIASES[provider] == LOCAL:
        _check_local(config)
    check_model_urls(config, "embedding_model")
    return config


def torch_installed() -> bool:
    """Whether the local torch engine can run here (torch and sentence-transformers; nothing imported)."""
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "sentence_transformers"))


def _check_local(config: dict[str, Any]) -> None:
    """The local provider's `engine` and `precision`: known values, and a pair this install can run."""
    for key, allowed in (("engine", ENGINES), ("precision", PRECISIONS)):
        value = config.get(key)
        if value is not None and value not in allowed:
            raise BadRequest(
                f"'embedding_model.{key}' must be one of: {', '.join(allowed)} (got {value!r})",
                title="Invalid embedding model",
            )
    engine, precision = config.get("engine") or "auto", config.get("precision") or "auto"
    if engine == "auto":
        engine = "torch" if torch_installed() else "onnx"
    if engine == "torch" and not torch_installed():
        raise BadRequest(
            "'embedding_model.engine' 'torch' needs torch and sentence-transformers, which this server does "
            "not have (pip install 'agentkb[torch]'); use 'onnx' or 'auto'",
            title="Invalid embedding model",
        )
    if engine == "onnx" and precision == "bfloat16":
        raise BadRequest(
            "'embedding_model.precision' 'bfloat16' needs the torch engine (the ONNX model is int8)",
            title="Invalid embedding model",
        )


def kind(config: dict[str, Any]) -> str:
    """`local` (in this process), `openai` (an OpenAI-compatible HTTP API, Ollama's too), `azure_openai`,
    `gemini`, `bedrock` or `snowflake`."""
    return _ALIASES[config["provider"]]


def known_dimension(config: dict[str, Any]) -> int | None:
    if isinstance(config.get("dimensions"), int):
        return int(config["dimensions"])
    return KNOWN_DIMENSIONS.get((kind(config), str(config["model_name"]).lower()))
