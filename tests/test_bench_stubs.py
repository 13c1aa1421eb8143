"""The benchmarks' stub embedder: vectors computed before a run are the ones it would compute on request."""

from __future__ import annotations

import numpy as np

from bench.stubs import HashedBow, precomputed


def test_precomputed_vectors_are_the_computed_ones_and_count_what_they_lack() -> None:
    known = ["alpha beta gamma", "the quick brown fox", "alpha beta gamma", ""]
    embed = precomputed(known)
    assert embed.misses == 0
    asked = ["the quick brown fox", "", "a text not known before", "alpha beta gamma"]
    vectors = embed(asked)
    assert np.array_equal(vectors, HashedBow()(asked))  # the same vectors, the unknown one included
    assert embed.misses == 1 and embed.hits == 3
    embed(["a text not known before"])  # computed once, then held
    assert embed.misses == 1
