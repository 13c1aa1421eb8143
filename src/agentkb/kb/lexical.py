"""BM25 over a knowledge base's chunks: the lexical side of hybrid search.

PostgreSQL's `ts_rank` is a weak lexical ranker (BEIR SciFact nDCG@10 0.37 against BM25's 0.66 with the
same corpus), so each process keeps a BM25 index per knowledge base (bm25s: sparse matrices, English
stop words, Snowball stemming), built from the chunk table — PostgreSQL stays the one store; the index is
a cache. It is keyed by the KB's `content_version`, which every write of chunks (insert, delete, a chunk's
UPDATE) moves in the writing transaction, whichever process writes, with `updated_at`, which the search
reads back in its own statement; a change of the KB's settings moves `updated_at` alone, so the index
outlives it (at a million chunks a build takes minutes of a CPU). A small KB
is (re)indexed on the search that finds it stale. A large one is re-indexed in the background, and its
searches meanwhile use the index of the version before (the chunks it names are read back as they are
now, so a deleted chunk is never returned; chunks written since are found by the vector side only);
before a large KB's first index is built, its hybrid searches rank by the vectors alone.

There is no full-text column in PostgreSQL: keeping `to_tsvector` up to date was about four fifths of
PostgreSQL's work per inserted chunk, for a ranker that only stood in while a large index was built.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentkb import metrics

if TYPE_CHECKING:
    import numpy as np


log = logging.getLogger(__name__)
SYNC_BUILD_MAX_CHUNKS = 20_000  # above this a first build runs in the background
K1 = 1.2
B = 0.75

Loader = Callable[[], Awaitable[tuple[list[str], list[str]]]]  # () -> (chunk ids, texts)


def _tokenizer() -> tuple[Any, Any]:
    import bm25s
    import Stemmer

    return bm25s, Stemmer.Stemmer("english")


@dataclass
class BM25Index:
    chunk_ids: list[str]
    model: Any
    stemmer: Any

    @classmethod
    def build(cls, chunk_ids: list[str], texts: list[str]) -> BM25Index:
        bm25s, stemmer = _tokenizer()
        tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
        model = bm25s.BM25(k1=K1, b=B)
        model.index(tokens, show_progress=False)
        return cls(chunk_ids, model, stemmer)

    def search(self, query: str, k: int) -> list[str]:
        """Chunk ids of the best `k` matches (only chunks sharing a term with the query), best first."""
        if not self.chunk_ids:
            return []
        import bm25s

        tokens = bm25s.tokenize(
            [query], stopwords="en", stemmer=self.stemmer, show_progress=False, return_ids=False
        )
        if not tokens or not tokens[0]:
            return []
        return [self.chunk_ids[int(i)] for i in top_scoring(self.model.get_scores(tokens[0]), k)]


def top_scoring(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the best `k` positive, finite scores, best first (ties: the lower index first).

    Only the scoring chunks are ranked: bm25s's own top-k (`BM25.retrieve`) partitions the whole score array,
    and NumPy's `argpartition` for the largest k of an array that is mostly tied zeros is pathologically slow
    (far slower than the same top k of the non-zero scores alone)."""
    import numpy as np

    hits = np.flatnonzero((scores > 0) & np.isfinite(scores))  # in index order
    if k <= 0:
        return hits[:0]
    if len(hits) > k:
        found = scores[hits]
        kth = -np.partition(-found, k - 1)[k - 1]  # the k-th best score
        above = hits[found > kth]
        hits = np.concatenate([above, hits[found == kth][: k - len(above)]])
    return hits[np.argsort(-scores[hits], kind="stable")]


class LexicalIndexes:
    """The per-process cache: kb id → (version, index). Only an index of the version asked for is served."""

    def __init__(self) -> None:
        self._indexes: dict[int, tuple[datetime, BM25Index]] = {}
        # kb id -> (version, its build, whether searches go on without waiting for it: a large KB)
        self._building: dict[int, tuple[datetime, asyncio.Task[BM25Index | None], bool]] = {}
        self._lock = threading.Lock()

    async def get(
        self, kb_id: int, version: datetime, size: Callable[[], Awaitable[int]], load: Loader
    ) -> BM25Index | None:
        """The index of `version`, built now when the KB is small; while a large KB's index of `version` is
        built in the background, the index of the version before (None before its first index). `size`
        (the KB's chunks, counted at least past `SYNC_BUILD_MAX_CHUNKS`) is asked only when a build starts,
        not by every search while one runs."""
        cached = self._indexes.get(kb_id)
        if cached is not None and cached[0] == version:
            return cached[1]
        building = self._building.get(kb_id)
        if building is None or building[0] != version:
            chunks = len(cached[1].chunk_ids) if cached is not None else await size()
            building = self._building.get(kb_id)  # another search may have started it meanwhile
            if building is None or building[0] != version:
                task = asyncio.create_task(self._build(kb_id, version, load))
                building = (version, task, chunks > SYNC_BUILD_MAX_CHUNKS)
                self._building[kb_id] = building
                task.add_done_callback(lambda t: self._done(kb_id, t))
        if building[2]:
            return cached[1] if cached is not None else None
        # this version's own build: searches of another version (a process's stale KB row and a fresh
        # one, side by side) may finish theirs later and keep theirs as the cached one
        return await asyncio.shield(building[1])

    def _done(self, kb_id: int, task: asyncio.Task[BM25Index | None]) -> None:
        current = self._building.get(kb_id)
        if current is not None and current[1] is task:
            del self._building[kb_id]

    async def _build(self, kb_id: int, version: datetime, load: Loader) -> BM25Index | None:
        try:
            chunk_ids, texts = await load()
            index = await asyncio.to_thread(BM25Index.build, chunk_ids, texts)
        except Exception:  # the vector side still answers; the next search tries again
            log.exception("BM25 index of knowledge base %s failed to build", kb_id)
            return None
        metrics.bm25_index_builds.inc()
        with self._lock:  # the newest version is the one kept
            kept = self._indexes.get(kb_id)
            if kept is None or kept[0] <= version:
                self._indexes[kb_id] = (version, index)
        return index

    def forget(self, kb_id: int) -> None:
        self._indexes.pop(kb_id, None)
