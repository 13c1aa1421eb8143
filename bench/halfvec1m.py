"""Would a half-precision HNSW index search a million chunks faster at the same recall? One chunk table, two
indexes built one after the other with the same parameters: over `embedding` (`vector_cosine_ops`, what a
knowledge base of up to 2,000 dimensions gets today) and over `embedding::halfvec(384)`
(`halfvec_cosine_ops`, what wider ones get); their size, build time, and at each `--sweep` ef_search the
recall@10 against exact search, the query's p50 over SQL (no HTTP) and PostgreSQL's own execution p50.

The SciFact corpus embedded once and tiled (`bench.scifact_tiles`, as `search1m`), loaded by agentkb's chunk
write into a KB of `agentkb serve`; the indexes are built in SQL (agentkb has no option for the second one
yet), with `maintenance_work_mem` 4GB and two parallel workers, each dropped before the next is built.

    python -m bench halfvec1m [--chunks 1000000] [--build 32:128] [--sweep 400,500,600,800]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import write_result
from bench.scifact_tiles import Corpus, bulk_load, prepare
from bench.search1m import configure
from bench.search100k import ints, load_average, served_kb
from bench.stubs import precomputed

DIM = 384
PRECISIONS = {  # name: (indexed expression, operator class, the query's distance)
    "vector": ("embedding", "vector_cosine_ops", "embedding <=> %s"),
    "halfvec": (
        f"(embedding::halfvec({DIM}))",
        "halfvec_cosine_ops",
        f"embedding::halfvec({DIM}) <=> %s::vector::halfvec({DIM})",
    ),
}


def measure(url: str, table: str, corpus: Corpus, m: int, efc: int, sweep: list[int]) -> list[dict[str, Any]]:
    import psycopg
    from pgvector.psycopg import register_vector

    rows: list[dict[str, Any]] = []
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SET maintenance_work_mem = '4GB'")
        conn.execute("SET max_parallel_maintenance_workers = 2")
        for precision, (expr, ops, distance) in PRECISIONS.items():
            conn.execute("DROP INDEX IF EXISTS bench_hnsw")
            started = time.perf_counter()
            conn.execute(
                f"CREATE INDEX bench_hnsw ON {table} USING hnsw ({expr} {ops}) "
                f"WITH (m = {m}, ef_construction = {efc})"
            )
            build_s = time.perf_counter() - started
            size = conn.execute("SELECT pg_relation_size('bench_hnsw')").fetchone()
            assert size is not None
            statement = f"SELECT chunk_id FROM {table} ORDER BY {distance} LIMIT 10"
            print(f"  {precision}: built in {build_s:.0f}s, {size[0] / 2**20:.0f} MiB", flush=True)
            for ef in sweep:
                conn.execute(f"SET hnsw.ef_search = {int(ef)}")
                took, recalls, executed = [], [], []
                for q, want in zip(corpus.query_vectors, corpus.truth_ids, strict=True):
                    t = time.perf_counter()
                    found = conn.execute(statement, (q,)).fetchall()
                    took.append(time.perf_counter() - t)
                    recalls.append(len({r[0] for r in found} & want) / 10)
                for q in corpus.query_vectors[:60]:
                    plan = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", (q,)).fetchone()
                    assert plan is not None and "bench_hnsw" in str(plan), "the index was not used"
                    executed.append(float(plan[0][0]["Execution Time"]))
                rows.append(
                    {
                        "precision": precision,
                        "index_mib": round(size[0] / 2**20),
                        "build_s": round(build_s, 1),
                        "ef_search": ef,
                        "recall@10": round(float(np.mean(recalls)), 4),
                        "sql_p50_ms": round(statistics.median(took) * 1000, 3),
                        "pg_execution_p50_ms": round(statistics.median(executed), 3),
                        "load_average": load_average(),
                    }
                )
                print(f"    {rows[-1]}", flush=True)
        conn.execute("DROP INDEX IF EXISTS bench_hnsw")
    return rows


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench halfvec1m", description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--build", default="32:128", help="HNSW m:ef_construction, for both indexes")
    parser.add_argument("--sweep", type=ints, default=[400, 500, 600, 800])
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/agentkb-bench"))
    args = parser.parse_args(argv)
    m, efc = (int(x) for x in args.build.split(":"))
    corpus = prepare(args.chunks, None, args.cache_dir)
    load_before = load_average()
    with served_kb(corpus, precomputed([])) as (_client, _base, url, table):
        postgres = configure(url, "4GB", 2)
        bulk_load(url, table, corpus.data, corpus.texts, corpus.sources)
        rows = measure(url, table, corpus, m, efc, args.sweep)
    write_result(
        "halfvec1m",
        {
            "chunks": len(corpus.data),
            "m": m,
            "ef_construction": efc,
            "postgres": postgres,
            "load_average_before": load_before,
            "table": rows,
            "note": "The same table, the two indexes built one after the other; HNSW graphs differ from build "
            "to build, so recall at one ef_search moves by about ±0.01 between builds of either kind.",
        },
    )
