"""Hybrid search: vector top-k and BM25's top-k fused by weighted reciprocal rank fusion (RRF)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.kb.filters import Filter
from agentkb.kb.lexical import BM25Index
from agentkb.kb.vectors import VectorSet, margin
from agentkb.storage import chunk_search
from agentkb.storage.chunk_filters import compile_filters
from agentkb.storage.chunk_search import Retrieval, Row

if TYPE_CHECKING:
    import numpy as np

DEFAULT_LIMIT = 10  # MindsDB's default and maximum for content searches
MAX_CONTENT_LIMIT = 100
MAX_LISTING_LIMIT = 10_000
DEFAULT_FUSION_K = 60
DEFAULT_ALPHA = 0.5
COLUMNS = ("id", "chunk_id", "chunk_content", "metadata", "distance", "relevance")


@dataclass(frozen=True, slots=True)
class SearchOptions:
    query: str | None = None
    filters: tuple[Filter, ...] = ()
    limit: int | None = None
    offset: int = 0
    relevance_threshold: float | None = None
    hybrid: bool = True
    alpha: float = DEFAULT_ALPHA  # weight of the vector ranking; 1 - alpha for BM25's
    fusion_k: int = DEFAULT_FUSION_K
    rerank: bool = True  # use the KB's reranking_model, if it has one


@dataclass(frozen=True, slots=True)
class Found:
    version: datetime | None  # the KB's `updated_at` in the search's snapshot (None: the KB is gone)
    hits: list[Hit]
    in_process: bool = False  # the vector side was ranked among `vectors` (kb.vectors)


@dataclass(frozen=True, slots=True)
class Hit:
    id: Any
    chunk_id: str
    chunk_content: str
    metadata: dict[str, Any]
    distance: float | None
    relevance: float | None

    def as_dict(self) -> dict[str, Any]:
        return {c: getattr(self, c) for c in COLUMNS}


def relevance(distance: float) -> float:
    """MindsDB's relevance without a reranker: 1 / (1 + cosine distance), in (1/3, 1]."""
    return 1.0 / (1.0 + max(distance, 0.0))


def fuse(rankings: Sequence[tuple[float, Sequence[Row]]], k: int) -> list[tuple[Row, float]]:
    """Weighted RRF: each list adds weight / (k + rank) to its rows (rank from 1); best first."""
    scores: dict[str, float] = {}
    rows: dict[str, Row] = {}
    for weight, ranking in rankings:
        if weight <= 0:
            continue
        for rank, row in enumerate(ranking, start=1):
            scores[row.chunk_id] = scores.get(row.chunk_id, 0.0) + weight / (k + rank)
            rows.setdefault(row.chunk_id, row)
    order = sorted(scores, key=lambda cid: (-scores[cid], rows[cid].distance or 0.0, cid))
    return [(rows[cid], scores[cid]) for cid in order]


def _hit(row: Row) -> Hit:
    doc_id = row.metadata.get("_original_doc_id", row.doc_id)
    if row.distance is None:
        return Hit(doc_id, row.chunk_id, row.content, row.metadata, None, None)
    return Hit(doc_id, row.chunk_id, row.content, row.metadata, row.distance, relevance(row.distance))


def content_limit(options: SearchOptions) -> int:
    return min(options.limit if options.limit is not None else DEFAULT_LIMIT, MAX_CONTENT_LIMIT)


def candidates(options: SearchOptions) -> int:
    """How many rows each ranking contributes to the fusion."""
    return max((content_limit(options) + options.offset) * 4, 40)


def lexical_weight(options: SearchOptions) -> float:
    return 0.0 if not options.hybrid else 1.0 - options.alpha


def lexical_k(options: SearchOptions) -> int:
    """How many BM25 ids to ask for: more when filters may drop some."""
    return candidates(options) * (5 if options.filters else 1)


def bm25_ids(lexical: BM25Index | None, options: SearchOptions) -> list[str] | None:
    """BM25's candidates for a hybrid search (None: not hybrid, or no index)."""
    if lexical is None or options.query is None or lexical_weight(options) <= 0:
        return None
    return lexical.search(options.query, lexical_k(options))


async def search(
    conn: AsyncConnection,
    kb_id: int,
    table: str,
    dim: int,
    options: SearchOptions,
    query_vector: np.ndarray | None,
    lexical_ids: list[str] | None = None,
    *,
    ef_search: int | None = None,
    vectors: VectorSet | None = None,
) -> Found:
    """Content search (needs `query_vector`) or, with no `query`, a filtered listing of chunks; in one
    statement, with the KB's version (`updated_at`, None when it is gone). A hybrid search ranks its
    lexical side by `lexical_ids` (BM25's); with None (no index yet: a large KB's first one is building)
    it is ranked by the vectors alone. `vectors`: the KB's vectors held in the process (kb.vectors), which
    an unfiltered search ranks itself where its table has no index; the version found tells whether they
    were still the KB's."""
    where, params = compile_filters(options.filters)
    if options.query is None or query_vector is None:
        limit = min(options.limit if options.limit is not None else MAX_LISTING_LIMIT, MAX_LISTING_LIMIT)
        got = await chunk_search.retrieve(
            conn, Retrieval(kb_id, table, dim, where, params, listing=(limit, options.offset))
        )
        return Found(got.version, [_hit(r) for r in got.listing])
    wanted = content_limit(options) + options.offset
    alpha = 1.0 - lexical_weight(options)
    hybrid = alpha < 1.0 and lexical_ids is not None
    # a fusion takes `candidates` rows of each ranking; a ranking alone needs only the rows it returns (the
    # HNSW scan's breadth is `ef_search` either way)
    k = candidates(options) if hybrid else wanted
    near = vectors.nearest(query_vector, margin(k)) if vectors is not None and not options.filters else None
    got = await chunk_search.retrieve(
        conn,
        Retrieval(
            kb_id,
            table,
            dim,
            where,
            params,
            query=query_vector,
            vector_k=k,
            ids=lexical_ids if hybrid else None,
            ef_search=ef_search,
            near=near,
        ),
    )
    if hybrid:
        fused = fuse([(alpha, got.vector), (1.0 - alpha, got.ids[:k])], options.fusion_k)
    else:  # vector search, or hybrid before a large KB's first BM25 index is built
        fused = fuse([(1.0, got.vector)], options.fusion_k)
    hits = [_hit(row) for row, _ in fused]
    if options.relevance_threshold is not None:
        hits = [h for h in hits if h.relevance is not None and h.relevance >= options.relevance_threshold]
    return Found(got.version, hits[options.offset : wanted], got.in_process)
