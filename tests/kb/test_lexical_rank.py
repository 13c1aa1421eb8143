"""BM25's top k (kb.lexical): only positive, finite scores, best first, ties in chunk order — the same
ranking as bm25s's own scores, without partitioning the whole score array."""

from __future__ import annotations

import numpy as np
import pytest

from agentkb.kb.lexical import BM25Index, top_scoring


def reference(scores: np.ndarray, k: int) -> list[int]:
    scoring = [i for i, s in enumerate(scores.tolist()) if s > 0 and np.isfinite(s)]
    return sorted(scoring, key=lambda i: (-scores[i], i))[: max(k, 0)]


def test_top_scoring_matches_a_plain_sort() -> None:
    rng = np.random.default_rng(7)
    values = np.array([0, 0, 0, 0, 1.5, 2.0, 2.0, 3.25, np.nan, np.inf, -1.0], dtype=np.float32)
    for _ in range(2000):
        scores = rng.choice(values, int(rng.integers(0, 80)))
        k = int(rng.integers(-1, 20))
        assert top_scoring(scores, k).tolist() == reference(scores, k)


def test_top_scoring_of_a_large_mostly_zero_array() -> None:
    rng = np.random.default_rng(8)
    scores = np.zeros(100_000, dtype=np.float32)
    picked = rng.choice(len(scores), 700, replace=False)
    scores[picked] = rng.integers(1, 30, len(picked)).astype(np.float32) / 4  # many ties among them
    for k in (1, 40, 699, 700, 5000):
        assert top_scoring(scores, k).tolist() == reference(scores, k)


@pytest.fixture(scope="module")
def index() -> BM25Index:
    texts = [
        "the lighthouse keeper logs every ship",
        "ships pass the harbour at night",
        "a keeper of bees sells honey",
        "the lighthouse keeper logs every ship",  # the same text as the first: a tie
        "nothing about the sea here",
        "honey and bees in the garden",
    ]
    return BM25Index.build([f"c{i}" for i in range(len(texts))], texts)


def test_search_ranks_by_bm25s_scores(index: BM25Index) -> None:
    import bm25s

    query = "lighthouse keeper ship"
    tokens = bm25s.tokenize(
        [query], stopwords="en", stemmer=index.stemmer, show_progress=False, return_ids=False
    )
    scores = index.model.get_scores(tokens[0])
    expected = [f"c{i}" for i in reference(scores, 10)]
    assert index.search(query, 10) == expected
    assert expected[:2] == ["c0", "c3"]  # the tied pair, in chunk order, ahead of the rest
    assert "c4" not in expected and "c5" not in expected  # no shared term: not returned
    assert index.search(query, 1) == ["c0"]


def test_search_without_a_known_term_finds_nothing(index: BM25Index) -> None:
    assert index.search("zebra quantum", 10) == []
    assert index.search("the", 10) == []  # a stop word only
