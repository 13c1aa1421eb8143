"""A knowledge base's metadata filters: what a search may be restricted by (the SQL parser, the REST
search body and agents' tool inputs all produce these; `storage.chunk_filters` turns them into SQL)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

FilterOp = Literal[
    "=", "!=", "<", "<=", ">", ">=", "in", "not in", "like", "not like", "is null", "is not null"
]


@dataclass(frozen=True)
class Filter:
    key: str  # a metadata key, or "id" / "chunk_id" for document / chunk ids
    op: FilterOp
    value: Any  # a scalar; a tuple for in / not in; None for is null / is not null
