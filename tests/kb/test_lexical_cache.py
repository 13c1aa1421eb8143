"""The per-process BM25 cache (kb.lexical.LexicalIndexes): a small KB's index is built on the search that
needs it; a large KB's is built in the background while its searches use the index of the version before
(none before the first build: those searches rank by vectors alone)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from agentkb.kb import lexical
from agentkb.kb.lexical import LexicalIndexes

V1 = datetime(2026, 1, 1, tzinfo=UTC)
V2 = V1 + timedelta(seconds=1)


class Corpus:
    """The chunk table as the loader reads it; `gate` holds a load until the test lets it go."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.texts = texts
        self.gate = asyncio.Event()
        self.gate.set()
        self.loads = 0
        self.sized = 0

    async def size(self) -> int:
        self.sized += 1
        await asyncio.sleep(0)  # a round trip: other searches run meanwhile
        return len(self.texts)

    async def load(self) -> tuple[list[str], list[str]]:
        self.loads += 1
        await self.gate.wait()
        ids = sorted(self.texts)
        return ids, [self.texts[i] for i in ids]


async def test_small_kb_is_indexed_on_the_search_that_needs_it() -> None:
    corpus = Corpus({"a": "the fuser unit overheated", "b": "paper jammed at the rear roller"})
    cache = LexicalIndexes()
    index = await cache.get(1, V1, corpus.size, corpus.load)
    assert index is not None and index.search("fuser", 5) == ["a"]
    corpus.texts["c"] = "the fuser was replaced"
    index = await cache.get(1, V2, corpus.size, corpus.load)  # a new version: indexed again, now
    assert index is not None and sorted(index.search("fuser", 5)) == ["a", "c"]
    assert corpus.loads == 2


async def test_large_kb_serves_the_version_before_while_it_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexical, "SYNC_BUILD_MAX_CHUNKS", 1)  # two chunks count as a large KB
    corpus = Corpus({"a": "the fuser unit overheated", "b": "paper jammed at the rear roller"})
    cache = LexicalIndexes()
    corpus.gate.clear()
    assert await cache.get(1, V1, corpus.size, corpus.load) is None  # nothing built yet: vectors alone
    corpus.gate.set()
    for _ in range(200):  # the background build
        if (index := await cache.get(1, V1, corpus.size, corpus.load)) is not None:
            break
        await asyncio.sleep(0.01)
    assert index is not None and index.search("fuser", 5) == ["a"]

    corpus.texts["c"] = "the fuser was replaced"
    corpus.gate.clear()
    stale = await cache.get(1, V2, corpus.size, corpus.load)
    assert stale is index  # V2 is building: the V1 index answers meanwhile
    corpus.gate.set()
    for _ in range(200):
        if (fresh := await cache.get(1, V2, corpus.size, corpus.load)) is not index:
            break
        await asyncio.sleep(0.01)
    assert fresh is not None and sorted(fresh.search("fuser", 5)) == ["a", "c"]
    assert corpus.loads == 2


async def test_two_versions_built_side_by_side_each_get_their_own() -> None:
    """A search with a process's stale row of the KB and one with a fresh row build side by side; the
    older build finishing last neither hides the newer index from its search nor replaces it."""
    old_gate, new_gate = asyncio.Event(), asyncio.Event()
    texts = {"a": "the fuser unit overheated", "b": "paper jammed at the rear roller"}

    def loader(gate: asyncio.Event, extra: dict[str, str]) -> lexical.Loader:
        async def load() -> tuple[list[str], list[str]]:
            await gate.wait()
            rows = {**texts, **extra}
            return sorted(rows), [rows[i] for i in sorted(rows)]

        return load

    async def size() -> int:
        return 2

    cache = LexicalIndexes()
    old = asyncio.create_task(cache.get(1, V1, size, loader(old_gate, {})))
    new = asyncio.create_task(cache.get(1, V2, size, loader(new_gate, {"c": "the fuser was replaced"})))
    await asyncio.sleep(0.01)
    new_gate.set()
    newer = await new
    old_gate.set()
    older = await old
    assert newer is not None and sorted(newer.search("fuser", 5)) == ["a", "c"]
    assert older is not None and older.search("fuser", 5) == ["a"]
    assert await cache.get(1, V2, size, loader(old_gate, {})) is newer  # the newer one stays cached


async def test_searches_during_a_large_build_neither_count_nor_build_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a large KB's first index builds, its searches go on by vectors alone without counting its
    chunks again (at a million chunks each count read the whole table) or starting another build, however
    many arrive at once."""
    monkeypatch.setattr(lexical, "SYNC_BUILD_MAX_CHUNKS", 1)
    corpus = Corpus({"a": "the fuser unit overheated", "b": "paper jammed at the rear roller"})
    cache = LexicalIndexes()
    corpus.gate.clear()
    found = await asyncio.gather(*(cache.get(1, V1, corpus.size, corpus.load) for _ in range(5)))
    assert found == [None] * 5
    for _ in range(20):
        assert await cache.get(1, V1, corpus.size, corpus.load) is None
    assert corpus.loads == 1
    assert corpus.sized <= 5  # the concurrent first searches; none of the later ones
    sized = corpus.sized
    corpus.gate.set()
    for _ in range(200):
        if (index := await cache.get(1, V1, corpus.size, corpus.load)) is not None:
            break
        await asyncio.sleep(0.01)
    assert index is not None and index.search("fuser", 5) == ["a"]
    assert (corpus.loads, corpus.sized) == (1, sized)
