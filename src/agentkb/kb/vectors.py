"""Unindexed knowledge bases' vectors kept in the process: an unfiltered vector search ranks them here and asks
PostgreSQL only for the best candidates' rows (by chunk id, with PostgreSQL's own distances, which give the
final order) and the KB's version, still in one statement.

This replaces the exact scan PostgreSQL runs over a chunk table with no HNSW index (storage.chunk_search),
which computes each distance row by row, with one NumPy product over the same unit vectors, many times
cheaper. The answers are the scan's: the candidates are a few more than asked for, and PostgreSQL's distances
rank them. A set is a cache keyed by the KB's `updated_at` (the BM25 indexes of kb.lexical are keyed by its
`content_version`, which only writes of chunks move), which every change moves in its own transaction,
whichever process writes: a set is loaded with the version it was read with, in one snapshot, and used only
for a search of that version; the search reads the version back in its statement, so a write between the two
is noticed (and the search run again in PostgreSQL). Sets load in the background, one at a time per KB
(spaced out: `LOAD_SPACING`), after a search finds none of its version; until then searches scan in PostgreSQL
as before. A table with more than `MAX_CHUNKS` chunks, or whose HNSW index holds any, is searched through the
index, at the KB's breadth (a set found indexed since its load is dropped: `VectorSets.decline`); all sets
together stay under the byte budget (`AGENTKB_VECTOR_CACHE_MB`), the least recently used dropped first.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from agentkb.storage.vector_index import MAX_VECTOR_INDEX_DIM

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

# a table of 4,000 rows or more gets an HNSW index (service.ingest.vector_merge.MIN_TABLE_ROWS) once its inserts
# settle, which then answers its searches, as it does a smaller table's where one was made (CREATE INDEX ON
# KNOWLEDGE_BASE): its breadth (`ef_search`) is the KB's choice. Until the index holds its rows (a bulk load's
# first build takes seconds), a larger table is ranked here too: up to this many chunks (29 MB at 384-d, a
# fifth of the default budget), against PostgreSQL's exact scan of every row beside the build
MAX_CHUNKS = 20_000
# a KB's next load starts no sooner than this many times its last load's duration after it: a load costs
# CPU in PostgreSQL and in this process, and a KB written to between every two searches would otherwise be
# loaded again and again for searches that find it changed
LOAD_SPACING = 10.0
ROW_OVERHEAD = 80  # bytes a set holds per chunk besides its vector (the id's string and its list slot)


def margin(k: int) -> int:
    """How many candidates to fetch for a top `k`: PostgreSQL's distances (float sums in another order)
    may differ from NumPy's in the last bits, so a few more than `k` are re-ranked by PostgreSQL's."""
    return k + max(8, k // 4)


@dataclass(frozen=True, slots=True)
class Loaded:
    """What a load read in one snapshot: the KB's version (None: the KB is gone), and its chunk ids and
    vectors (None: the table holds more than the limit asked for, or its HNSW index holds rows)."""

    version: datetime | None
    chunk_ids: list[str] | None
    vectors: np.ndarray | None


class VectorSet:
    """One version's chunk ids and unit vectors (float32, a row each; a zero vector's row is NaN: PostgreSQL's
    cosine distance to it is NaN too, ranked last)."""

    def __init__(self, version: datetime, chunk_ids: list[str], vectors: np.ndarray) -> None:
        import numpy as np

        single_threaded_blas()
        self.version = version
        self.chunk_ids = chunk_ids
        self.half = vectors.ndim == 2 and vectors.shape[1] > MAX_VECTOR_INDEX_DIM
        rows = _precision(np.asarray(vectors, dtype=np.float32), self.half)
        with np.errstate(divide="ignore", invalid="ignore"):
            norms = np.linalg.norm(rows, axis=1, keepdims=True)
            self.unit = np.where(norms > 0, rows / norms, np.nan).astype(np.float32)

    @property
    def nbytes(self) -> int:
        return int(self.unit.nbytes) + ROW_OVERHEAD * len(self.chunk_ids)

    def nearest(self, query: np.ndarray, k: int) -> list[str]:
        """The chunk ids of the `k` rows nearest `query` by cosine distance, in no particular order."""
        import numpy as np

        n = len(self.chunk_ids)
        if k <= 0 or n == 0:
            return []
        q = _precision(np.asarray(query, dtype=np.float32).reshape(-1), self.half)
        norm = float(np.linalg.norm(q))
        if not np.isfinite(norm) or norm == 0.0:
            scores = np.zeros(n, dtype=np.float32)
        else:
            scores = (self.unit @ (q / norm)).astype(np.float32, copy=False)
            scores[np.isnan(scores)] = -np.inf
        if k >= n:
            return list(self.chunk_ids)
        top = np.argpartition(-scores, k - 1)[:k]
        return [self.chunk_ids[int(i)] for i in top]


def _precision(vectors: np.ndarray, half: bool) -> np.ndarray:
    """As PostgreSQL compares them: wider than the index's limit, through `halfvec` (rounded to float16)."""
    import numpy as np

    return vectors.astype(np.float16).astype(np.float32) if half else vectors


Loader = Callable[[], Awaitable[Loaded]]


@functools.cache
def single_threaded_blas() -> None:
    """Run NumPy's BLAS on one thread in this process (it applies process-wide), once, as the first set is
    made (NumPy, and with it its BLAS, is imported on first use). Its products here are small (a KB's vectors,
    a query at a time) and the server runs one event loop: OpenBLAS's worker threads shorten one product a
    little but then spin waiting for their next task, and a server answering searches a few milliseconds apart
    spends far more CPU on that spinning than on the products themselves."""
    import numpy  # noqa: F401  (loads the BLAS the limit applies to)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


class VectorSets:
    """The per-process cache: kb id → the newest set loaded, within `max_bytes` in all."""

    def __init__(self, max_bytes: int, *, spacing: float = LOAD_SPACING) -> None:
        self.max_bytes = max_bytes
        self.spacing = spacing
        self._next_load: dict[int, float] = {}  # kb id → the monotonic time its next load may start
        self._sets: OrderedDict[int, VectorSet] = OrderedDict()
        self._declined: dict[int, datetime] = {}  # kb id → a version found indexed or too large
        self._loading: dict[int, asyncio.Task[None]] = {}

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self._sets.values())

    def max_rows(self, dim: int) -> int:
        """The most chunks of `dim` dimensions a load may read: `MAX_CHUNKS`, fewer where a set that large
        would not fit the budget (it would be read only to be declined)."""
        return min(MAX_CHUNKS, self.max_bytes // (4 * dim + ROW_OVERHEAD))

    def get(self, kb_id: int, version: datetime, load: Loader) -> VectorSet | None:
        """The set of `version`, or None: then a load starts, unless one is running, the KB's last one ended
        too recently, or this version was found indexed or too large."""
        cached = self._sets.get(kb_id)
        if cached is not None and cached.version == version:
            self._sets.move_to_end(kb_id)
            return cached
        if self.max_bytes <= 0 or kb_id in self._loading:
            return None
        if time.monotonic() < self._next_load.get(kb_id, 0.0):
            return None
        if self._declined.get(kb_id) == version:
            return None
        task = asyncio.create_task(self._load(kb_id, load))
        self._loading[kb_id] = task
        task.add_done_callback(
            lambda t: self._loading.pop(kb_id, None) if self._loading.get(kb_id) is t else None
        )
        return None

    async def _load(self, kb_id: int, load: Loader) -> None:
        started = time.monotonic()
        try:
            await self._take(kb_id, load)
        finally:
            ended = time.monotonic()
            self._next_load[kb_id] = ended + self.spacing * (ended - started)

    async def _take(self, kb_id: int, load: Loader) -> None:
        try:
            got = await load()
            if got.version is None:  # the KB is gone
                self.forget(kb_id)
                return
            if got.chunk_ids is None or got.vectors is None:
                self._sets.pop(kb_id, None)
                self._declined[kb_id] = got.version
                return
            found = await asyncio.to_thread(VectorSet, got.version, got.chunk_ids, got.vectors)
        except Exception:  # searches go on scanning in PostgreSQL; a later search tries again
            log.exception("vectors of knowledge base %s failed to load", kb_id)
            return
        self._declined.pop(kb_id, None)
        kept = self._sets.get(kb_id)
        if kept is not None and kept.version > found.version:
            return
        if found.nbytes > self.max_bytes:
            self._declined[kb_id] = found.version
            self._sets.pop(kb_id, None)
            return
        self._sets[kb_id] = found
        self._sets.move_to_end(kb_id)
        while self.nbytes > self.max_bytes:
            self._sets.popitem(last=False)

    def decline(self, kb_id: int, version: datetime) -> None:
        """Drop the KB's set of `version` and load none for it again (its table was found indexed)."""
        if (held := self._sets.get(kb_id)) is not None and held.version == version:
            del self._sets[kb_id]
        self._declined[kb_id] = version

    def forget(self, kb_id: int) -> None:
        self._sets.pop(kb_id, None)
        self._declined.pop(kb_id, None)
        self._next_load.pop(kb_id, None)

    async def aclose(self) -> None:
        tasks = list(self._loading.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
