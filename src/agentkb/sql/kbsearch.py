"""One knowledge-base search as MindsDB's SQL describes it: `KBQuery`, and `assemble`, which reads AND-ed
conditions as one search (the content text, the relevance threshold, MindsDB's flags and the metadata
filters). Pure; `kbquery` parses SELECTs into it, `kb_algebra` combines several."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agentkb.errors import BadRequest
from agentkb.kb.filters import Filter, FilterOp

KB_COLUMNS: tuple[str, ...] = ("id", "chunk_id", "chunk_content", "metadata", "distance", "relevance")
CONTENT_COLUMNS = frozenset({"content", "chunk_content"})
FLAG_COLUMNS = frozenset({"reranking", "hybrid_search", "hybrid_search_alpha"})

Condition = tuple[str, FilterOp, Any]  # (column or metadata key, operator, value)


@dataclass(frozen=True)
class KBQuery:
    project: str | None
    kb: str
    columns: tuple[str, ...] | None  # None = SELECT *; `metadata.<k>`: a metadata key named as a KB column
    content: str | None
    filters: tuple[Filter, ...]
    relevance_threshold: float | None
    limit: int | None
    offset: int | None
    hybrid_search: bool | None
    hybrid_search_alpha: float | None
    reranking: bool | None
    order_by: tuple[tuple[str, bool], ...]  # (column, descending)
    column_names: tuple[str, ...] | None = None  # output names of `columns` where any is aliased


def assemble(
    project: str | None,
    kb: str,
    conditions: Iterable[Condition],
    *,
    columns: tuple[str, ...] | None = None,
    column_names: tuple[str, ...] | None = None,
    limit: int | None = None,
    offset: int | None = None,
    order_by: tuple[tuple[str, bool], ...] = (),
) -> KBQuery:
    """One search from AND-ed conditions: the content text, the relevance threshold, MindsDB's flags and the
    metadata filters; 400 naming a condition that one search cannot express."""
    content: str | None = None
    threshold: float | None = None
    flags: dict[str, Any] = {}
    filters: list[Filter] = []
    for key, op, value in conditions:
        if key in CONTENT_COLUMNS:
            if op not in ("=", "like"):
                raise BadRequest(
                    f"content {op.upper()} is not supported yet: use content = '...' "
                    "(or LIKE) for a semantic search"
                )
            if content is not None:
                raise BadRequest("Only one content condition is supported per query")
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise BadRequest("content must be compared with a string, e.g. content = 'search text'")
            content = str(value).strip(" %") if op == "like" else str(value)  # MindsDB drops LIKE's '%'
        elif key == "relevance":
            if op not in (">=", ">"):
                raise BadRequest(
                    f"relevance {op.upper()} is not supported: use relevance >= x or relevance > x"
                )
            if threshold is not None:
                raise BadRequest("Only one relevance condition is supported per query")
            threshold = _unit_float("relevance", value)
        elif key in FLAG_COLUMNS:
            if op != "=":
                raise BadRequest(
                    f"{key} can only be set with =, e.g. {key} = "
                    f"{'0.5' if key == 'hybrid_search_alpha' else 'true'}"
                )
            if key in flags:
                raise BadRequest(f"{key} is given more than once")
            flags[key] = _unit_float(key, value) if key == "hybrid_search_alpha" else _bool(key, value)
        elif key == "distance":
            raise BadRequest("Filtering on distance is not supported: use relevance >= x")
        elif key == "metadata":
            raise BadRequest(
                "Compare a metadata key (metadata->>'key' or metadata.key), not the whole metadata column"
            )
        else:
            filters.append(Filter(key, op, value))
    return KBQuery(
        project=project,
        kb=kb,
        columns=columns,
        content=content,
        filters=tuple(filters),
        relevance_threshold=threshold,
        limit=limit,
        offset=offset,
        hybrid_search=flags.get("hybrid_search"),
        hybrid_search_alpha=flags.get("hybrid_search_alpha"),
        reranking=flags.get("reranking"),
        order_by=order_by,
        column_names=column_names,
    )


def _unit_float(name: str, value: Any) -> float:
    try:
        x = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        x = math.nan
    if not 0.0 <= x <= 1.0:  # NaN fails this too
        raise BadRequest(f"{name} must be a number between 0 and 1, got {value!r}")
    return x


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, (bool, int)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise BadRequest(f"{name} must be true or false, got {value!r}")
