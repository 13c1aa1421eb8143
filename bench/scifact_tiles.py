"""The SciFact corpus as many chunks of real text vectors, for the search benchmarks (`search100k`,
`search1m`): embedded once, tiled to any size, its exact top 10 per query, and a bulk load of a KB's chunk
table.

The corpus is BEIR SciFact (/work/shared/data/scifact/, 5,183 abstracts, 300 test queries), embedded
once with agentkb's local model (all-MiniLM-L6-v2, 384-d; each document's first 300 characters, its
title and opening, to keep that step short on a small machine) and cached under a cache folder
(/tmp/agentkb-bench/). It is tiled to N vectors: tile 0 is the corpus itself; each later tile `t` holds,
for every document `i`, `normalise(v_i + 0.25 * v_j + n)`, where `j` is a random other document (a fresh
permutation per tile) and `n` Gaussian noise of norm ~0.1: vectors that keep the corpus's real structure
(clusters, topics) but are not duplicates (cosine to their source ≈ 0.95). The chunk text is the source
document's, marked with its tile. The exact top 10 is numpy brute force, a block of rows at a time.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.beir import MODEL, load, local_encoder

EMBED_CHARS = 300
SEED = 5
LOAD_BATCH = 10_000  # rows a transaction of the bulk load


def vectors(texts: list[str], name: str, cache: Path) -> np.ndarray:
    """The local model's vectors for `texts`, cached in `cache` by the texts' digest."""
    digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
    path = cache / f"scifact-{name}-{MODEL}-{digest}.npy"
    if path.exists():
        return np.load(path)
    print(f"embedding {len(texts):,} {name} texts with {MODEL} (once; cached in {path})", flush=True)
    started = time.perf_counter()
    out = np.asarray(local_encoder()(texts), dtype=np.float32)
    print(f"  {time.perf_counter() - started:.0f}s", flush=True)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, out)
    return out


def tile(base: np.ndarray, n: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """(n vectors, the source document of each): tile 0 is `base`, later tiles mix and perturb it."""
    rng = np.random.default_rng(seed)
    count = len(base)
    parts, sources = [base], [np.arange(count)]
    total = count
    while total < n:
        other = base[rng.permutation(count)]
        noise = rng.standard_normal(base.shape).astype(np.float32) * (0.1 / np.sqrt(base.shape[1]))
        mixed = base + 0.25 * other + noise
        parts.append(mixed / np.linalg.norm(mixed, axis=1, keepdims=True))
        sources.append(np.arange(count))
        total += count
    return np.concatenate(parts)[:n].astype(np.float32), np.concatenate(sources)[:n]


def exact_top10(data: np.ndarray, queries: np.ndarray, block: int = 100_000) -> list[set[int]]:
    """Each query's 10 nearest rows of `data` by inner product (brute force), `block` rows at a time."""
    best_scores = np.empty((len(queries), 0), dtype=np.float32)
    best_rows = np.empty((len(queries), 0), dtype=np.int64)
    for start in range(0, len(data), block):
        part = data[start : start + block]
        scores = np.concatenate([best_scores, queries @ part.T], axis=1)
        ids = np.broadcast_to(np.arange(start, start + len(part)), (len(queries), len(part)))
        rows = np.concatenate([best_rows, ids], axis=1)
        keep = np.argpartition(-scores, 10, axis=1)[:, :10]
        best_scores = np.take_along_axis(scores, keep, axis=1)
        best_rows = np.take_along_axis(rows, keep, axis=1)
    return [set(map(int, row)) for row in best_rows]


def bulk_load(url: str, table: str, data: np.ndarray, texts: list[str], sources: np.ndarray) -> float:
    """The chunks written by agentkb's chunk write (`copy_new_chunks`, a transaction per `LOAD_BATCH` rows),
    the HNSW index dropped first (`rebuild` builds it over every row after, as `CREATE INDEX ON
    KNOWLEDGE_BASE` does); seconds taken."""
    took = asyncio.run(_bulk_load(url, table, data, texts, sources))
    print(f"  loaded {len(data):,} rows in {took:.0f}s ({len(data) / took:,.0f} rows/s)", flush=True)
    return took


async def _bulk_load(url: str, table: str, data: np.ndarray, texts: list[str], sources: np.ndarray) -> float:
    from sqlalchemy import text

    from agentkb.storage.chunks import ChunkWrite, copy_new_chunks
    from agentkb.storage.db import Database

    db = Database(url, pool_size=1)
    started = time.perf_counter()
    try:
        async with db.transaction() as conn:
            await conn.execute(text(f"DROP INDEX IF EXISTS {table}_hnsw"))
        for start in range(0, len(data), LOAD_BATCH):
            writes = []
            for i in range(start, min(start + LOAD_BATCH, len(data))):
                t, s = i // len(texts), int(sources[i])
                content = texts[s] if t == 0 else f"[tile {t}] {texts[s]}"
                row_id = f"{s}:{t}"
                digest = hashlib.sha256(content.encode()).hexdigest()
                metadata = {"_original_doc_id": row_id, "tile": t}
                writes.append(ChunkWrite(f"{row_id}:0", row_id, content, digest, metadata, data[i]))
            async with db.transaction() as conn:
                await copy_new_chunks(conn, table, writes)
        async with db.transaction() as conn:
            await conn.execute(text(f"ANALYZE {table}"))
            await conn.execute(
                text("UPDATE knowledge_bases SET updated_at = now() WHERE storage_table = :t"), {"t": table}
            )
    finally:
        await db.close()
    return time.perf_counter() - started


@dataclass
class Corpus:
    """The tiled SciFact vectors, their texts and the exact top 10 of each query."""

    texts: list[str]  # the documents
    query_texts: list[str]
    query_vectors: np.ndarray
    data: np.ndarray  # the tiled vectors
    sources: np.ndarray  # the document of each vector
    truth_ids: list[set[str]]  # each query's exact top 10, as chunk ids
    facts: dict[str, Any]  # for the result file


def prepare(chunks: int, docs: int | None, cache: Path) -> Corpus:
    corpus, queries, _ = load()
    texts = [c for _, c in corpus][:docs]
    query_texts = [q for _, q in queries]
    # the first EMBED_CHARS characters (title and opening) of each document: a tenth of the model's time
    doc_vectors = vectors([t[:EMBED_CHARS] for t in texts], "corpus", cache)
    query_vectors = vectors(query_texts, "queries", cache)
    data, sources = tile(doc_vectors, chunks)
    cosines = np.sum(data[len(texts) :] * doc_vectors[sources[len(texts) :]], axis=1)
    print(
        f"{len(data):,} vectors from {len(texts):,} SciFact documents (tiles' cosine to their source: mean "
        f"{cosines.mean():.3f}, min {cosines.min():.3f}), {len(queries)} queries",
        flush=True,
    )
    truth = exact_top10(data, query_vectors)
    truth_ids = [{f"{int(sources[i])}:{i // len(texts)}:0" for i in want} for want in truth]
    # how near-tied the exact top 10 are: the share of each query's top 10 that are copies of one document
    same_source = float(np.mean([max(np.bincount(sources[list(want)])) / 10 for want in truth]))
    facts = {
        "docs": len(texts),
        "tiles_cosine_to_source_mean": round(float(cosines.mean()), 4),
        "top10_largest_same_document_share": round(same_source, 3),
    }
    return Corpus(texts, query_texts, query_vectors, data, sources, truth_ids, facts)
