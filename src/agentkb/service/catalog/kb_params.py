"""Which of MindsDB's knowledge-base parameters agentkb takes, and the 400 for each it does not: every
parameter MindsDB accepts is applied or refused by name, never stored and left unused.

MindsDB's `KnowledgeBaseInputParams` (extra keys forbidden) takes, beside the models, columns and
`preprocessing`: `kb_no_upsert` and `kb_skip_existing` (options of an insert, which MindsDB stores with the
knowledge base and never reads there), `is_sparse` and `vector_size` (sparse vectors). `storage` names the
vector store. agentkb's own: `ef_search`, and `chunk_size` / `chunk_overlap` (`kb.preprocessing`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentkb.errors import BadRequest

TITLE = "Invalid parameter"
CHUNKING_KEYS = ("chunk_size", "chunk_overlap")
STORE = "agentkb_pgvector"
INSERT_OPTIONS = ("kb_no_upsert", "kb_skip_existing")
SPARSE_KEYS = ("is_sparse", "vector_size")


def refuse_storage(storage: Any) -> None:
    """`storage` (MindsDB's vector database and table): agentkb keeps every knowledge base's chunks in its
    own PostgreSQL + pgvector, so a storage elsewhere cannot be honoured."""
    if storage is not None:
        raise BadRequest(
            "'storage' is not supported: agentkb keeps every knowledge base's chunks in its own PostgreSQL + "
            f"pgvector (vector_database '{STORE}', a table per knowledge base); leave 'storage' out",
            title=TITLE,
        )


def _insert_option(key: str) -> BadRequest:
    return BadRequest(
        f"'{key}' is an option of an insert, not a setting of a knowledge base (MindsDB stores it with the "
        f"knowledge base and never reads it there): INSERT INTO <kb> ... USING {key} = true",
        title=TITLE,
    )


def check_sparse(params: Mapping[str, Any], dimension: int | None) -> None:
    """`is_sparse`: agentkb stores dense vectors (false is what it does; true is refused). `vector_size`: the
    size of the vectors, which the embedding model decides: refused unless it is that size (`dimension`;
    None: not known yet, checked once it is)."""
    sparse = params.get("is_sparse")
    if sparse is not None and sparse is not False:
        raise BadRequest(
            "'is_sparse' is not supported: agentkb stores dense vectors from the embedding model only",
            title=TITLE,
        )
    size = params.get("vector_size")
    if size is None:
        return
    if isinstance(size, bool) or not isinstance(size, int):
        raise BadRequest("'vector_size' must be an integer", title=TITLE)
    if dimension is not None and size != dimension:
        raise BadRequest(
            f"'vector_size' {size} is not the size of the embedding model's vectors ({dimension}): a knowledge "
            "base's vectors are its embedding model's (MindsDB reads vector_size for sparse vectors only)",
            title=TITLE,
        )


def check_keys(given: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    """400 naming the first key of `given` that is not `allowed` (an insert option named as one)."""
    for key in given:
        if key in allowed:
            continue
        if key in INSERT_OPTIONS:
            raise _insert_option(key)
        raise BadRequest(
            f"Parameter '{key}' is not allowed in {where}; the parameters are: {', '.join(allowed)}",
            title=TITLE,
        )


# The fields each model reads, by provider (`kb.embedders` and `kb.rerank`); other providers' fields are
# their own modules' to check.
_OPENAI_EMBEDDING = ("api_key", "base_url", "dimensions", "timeout", "batch_size", "concurrency")
_LOCAL_EMBEDDING = ("dimensions", "batch_size", "device", "engine", "precision")
MODEL_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "embedding_model": {
        **dict.fromkeys(("openai", "ollama"), _OPENAI_EMBEDDING),
        **dict.fromkeys(
            ("local", "sentence_transformers", "sentence-transformers", "huggingface"), _LOCAL_EMBEDDING
        ),
    },
    # `method` (multi-class, binary, no-logprobs) is applied and its values checked by `kb.rerank`
    "reranking_model": dict.fromkeys(
        ("openai", "ollama"), ("api_key", "base_url", "timeout", "filtering_threshold", "method")
    ),
}


def check_model_fields(key: str, given: Any, provider: Any) -> None:
    """400 naming a field of `given` (the `embedding_model` or `reranking_model` a request sends) that the
    model of `provider` does not read (MindsDB's reranker `mode`, for one)."""
    fields = MODEL_FIELDS[key].get(str(provider or "openai"))
    if not isinstance(given, Mapping) or fields is None:
        return
    for name, value in given.items():
        if value is None or name in ("provider", "model_name") or name in fields:
            continue
        why = f"provider {provider or 'openai'!r} reads {', '.join(('provider', 'model_name', *fields))}"
        if name == "api_version":
            why = "it is Azure OpenAI's; " + why
        raise BadRequest(f"'{key}.{name}' is not supported: {why}", title="Invalid parameter")
