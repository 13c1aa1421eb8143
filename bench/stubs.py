"""What the benchmarks feed the one OpenAI-compatible stub server (`tests/openai_stub.py`): embedders, a
chat script, and `bench_stub()`, the server as the benchmarks run it.

- `HashedBow`: a fixed random projection of a hashed bag of words: every word (lower-cased ASCII
  `[a-z0-9]+`) maps by crc32 to one row of a fixed Gaussian table; a text's vector is the L2-normalised
  sum of its words' rows (counted with repeats). Deterministic, cheap (a 500-character text: ~25 µs in
  batches of 1,000, ~95 µs alone, on a 2-vCPU AMD EPYC), and texts that share words get similar vectors, so
  vector search has structure to find. The benchmarks compute the same vectors in-process
  (`HashedBow()(texts)`) for exact brute-force ground truth.
- `CachedEmbeddings`: text → vector from a dict (e.g. real all-MiniLM-L6-v2 vectors cached on disk), with
  a fallback callable for texts it does not hold (counted in `misses`). `precomputed(texts)`: one for a
  workload whose texts are known before it starts, their `HashedBow` vectors computed up front, so that the
  stub answers with no work of its own per text (computing a 500-character text's vector in the stub took
  24-44 µs inside a running benchmark, on the path of every insert: a third of a 1,000-row PUT's time).
- `kb_tool_then_answer(kb)`: a chat script. While the conversation holds no tool result it calls
  `kb_query_tool` with `SELECT * FROM <kb> WHERE content = '<last user message>' LIMIT 5`; once it does,
  the fixed answer. It keeps no state between requests, so concurrent conversations do not disturb each
  other.

A knowledge base uses the stub with `stub.embedding_model()`
(`{"provider": "openai", "model_name": "stub", "base_url": stub.url, "dimensions": 384, "api_key": "x"}`),
an agent with `stub.chat_model()`.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from tests import openai_stub
from tests.openai_stub import CHAT_ANSWER, ChatScript, OpenAIStub, Reply

DIM = 384
# bytes other than ASCII letters and digits → space (on the lower-cased UTF-8 text)
_NON_WORD = bytes.maketrans(
    bytes(range(256)), bytes(c if chr(c).isascii() and chr(c).isalnum() else 32 for c in range(256))
)

EmbedFn = Callable[[list[str]], np.ndarray]


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the request's last user message ("" if none)."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # content parts
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def kb_tool_then_answer(kb: str, answer: str = "", limit: int = 5, tool: str = "kb_query_tool") -> ChatScript:
    """A stateless script: one `tool` call `SELECT * FROM <kb> WHERE content = '<question>' LIMIT <limit>`
    (argument `tool_input`) until the conversation holds a tool result, then the fixed `answer`
    (default `CHAT_ANSWER`)."""
    final = answer or CHAT_ANSWER

    def script(body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        if any(isinstance(m, dict) and m.get("role") in ("tool", "function") for m in messages):
            return openai_stub.text(final)
        question = " ".join(last_user_text(body).split()).replace("'", "''") or "benchmark"
        return openai_stub.tool_call(tool, f"SELECT * FROM {kb} WHERE content = '{question}' LIMIT {limit}")

    return script


def _normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (vectors / norms).astype(np.float32, copy=False)


class HashedBow:
    """Deterministic bag-of-words embeddings: unit vectors, similar texts → similar vectors."""

    def __init__(self, dim: int = DIM, buckets: int = 1 << 14, seed: int = 20240607) -> None:
        self.dim = dim
        self.mask = buckets - 1
        assert buckets & self.mask == 0, "buckets must be a power of two"
        self.table = np.random.default_rng(seed).standard_normal((buckets, dim), dtype=np.float32)
        self._bucket: dict[bytes, int] = {}

    def _row(self, word: bytes) -> int:
        row = self._bucket[word] = zlib.crc32(word) & self.mask
        return row

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        get = self._bucket.__getitem__
        columns: list[int] = []
        indptr = [0]
        for text in texts:
            words = text.lower().encode().translate(_NON_WORD).split()
            try:
                columns.extend(map(get, words))
            except KeyError:
                columns.extend(self._bucket.get(w) or self._row(w) for w in words)
            indptr.append(len(columns))
        counts = sp.csr_matrix(
            (
                np.ones(len(columns), dtype=np.float32),
                np.asarray(columns, dtype=np.int64),
                np.asarray(indptr),
            ),
            shape=(len(texts), self.mask + 1),
        )
        out = np.asarray(counts @ self.table, dtype=np.float32)
        for i in np.flatnonzero(np.diff(indptr) == 0):  # no words: a random vector seeded by the text's crc32
            seed = zlib.crc32(texts[i].encode())
            out[i] = np.random.default_rng(seed).standard_normal(self.dim, dtype=np.float32)
        return _normalize(out)


class CachedEmbeddings:
    """Vectors from a dict text → vector; texts not in it go to `fallback` (and are added)."""

    def __init__(self, vectors: dict[str, np.ndarray], fallback: EmbedFn | None = None) -> None:
        self.vectors = vectors
        self.fallback = fallback
        self.hits = 0
        self.misses = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            if self.fallback is None:
                raise KeyError(f"{len(missing)} texts not in the embedding cache, e.g. {missing[0][:80]!r}")
            for text, vector in zip(missing, self.fallback(missing), strict=True):
                self.vectors[text] = np.asarray(vector, dtype=np.float32)
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        return np.stack([self.vectors[t] for t in texts])


def precomputed(texts: Sequence[str], embed: EmbedFn | None = None) -> CachedEmbeddings:
    """`texts`' vectors (by `embed`, default `HashedBow()`) computed now and looked up when asked for; any
    other text is computed then (and counted in `misses`). The same vectors as `embed` alone."""
    embed = embed if embed is not None else HashedBow()
    known = list(dict.fromkeys(texts))
    return CachedEmbeddings(dict(zip(known, embed(known), strict=True)), fallback=embed)


def bench_stub(embed: EmbedFn | None = None, **options: Any) -> OpenAIStub:
    """The stub as the benchmarks run it: `embed` (default `HashedBow()`, 384-d) answered in order, requests
    counted but not recorded. `options` go to `OpenAIStub` (`chat_script`, `bind`, `public_host`, ...)."""
    embed = embed if embed is not None else HashedBow()
    return OpenAIStub(embed, dim=DIM, in_order=True, record=False, **options)
