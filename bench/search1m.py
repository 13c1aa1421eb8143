"""Search at a million chunks of real text vectors: load rate, HNSW build time, latency over HTTP at
recall@10 >= 0.95, and the memory of the server and of PostgreSQL.

The SciFact corpus embedded once and tiled to `--chunks` (1,000,000) vectors (`bench.scifact_tiles`, as
`search100k` does), in one KB of `agentkb serve` (embedded PostgreSQL, one process), then:

1. PostgreSQL's `maintenance_work_mem` set to `--maintenance-work-mem` (4GB: the graph of a million
   384-d vectors is about 2 GB, and pgvector builds it in memory while it fits) and
   `max_parallel_maintenance_workers` to `--parallel-workers` (pgvector's parallel build), by `ALTER SYSTEM`;
2. the chunks written by agentkb's chunk write (binary `COPY`, 10,000 rows a transaction), the HNSW index
   dropped: the load rate;
3. the HNSW index built by `CREATE INDEX ON KNOWLEDGE_BASE … WITH (m, ef_construction)` over the API
   (`--build`, m:ef_construction): the build time;
4. as `search100k` does: the HTTP floor, the HNSW query alone (SQL, no HTTP) at each `--sweep`
   `hnsw.ef_search` (recall@10 against numpy's exact top 10, PostgreSQL's execution time), then over HTTP
   (REST and SQL, vector-only and hybrid, one query at a time) at the smallest swept ef_search whose
   recall@10 is >= 0.95 (or `--http-ef`), hybrid once the BM25 index is built;
5. memory: the server's RSS (and its peak) and PostgreSQL's process tree (RSS and PSS sums), the table's
   and the index's size on disk;
6. `--api-rows` (10,000) more rows inserted over the API (`PUT`, 1,000 a request, instant stub embedder)
   into the KB of a million: the API insert rate.

    python -m bench search1m [--chunks 1000000] [--build 16:100] [--maintenance-work-mem 4GB]
        [--sweep 500,600,700,800,1000] [--http-ef 700] [--api-rows 10000]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import check, print_table, rate, write_result
from bench.scifact_tiles import EMBED_CHARS, bulk_load, prepare
from bench.search100k import KB, ints, load_average, measure_build, served_kb
from bench.server import memory
from bench.stubs import precomputed

PUT_ROWS = 1000


def configure(url: str, work_mem: str, workers: int) -> dict[str, Any]:
    """The build's memory and parallel workers (`ALTER SYSTEM`, reloaded); the settings as PostgreSQL reports them."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET maintenance_work_mem = '{work_mem}'")
        conn.execute(f"ALTER SYSTEM SET max_parallel_maintenance_workers = {int(workers)}")
        conn.execute("SELECT pg_reload_conf()")
        time.sleep(1)
        names = (
            "shared_buffers",
            "maintenance_work_mem",
            "max_parallel_maintenance_workers",
            "max_worker_processes",
        )
        out: dict[str, Any] = {n: conn.execute(f"SHOW {n}").fetchone()[0] for n in names}  # type: ignore[index]
        out["pgvector"] = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()[0]  # type: ignore[index]
    print(f"  PostgreSQL: {out}", flush=True)
    return out


def sizes(url: str, table: str) -> dict[str, float]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT pg_table_size(%s), pg_indexes_size(%s), pg_relation_size(%s)",
            (table, table, f"{table}_hnsw"),
        ).fetchone()
    assert row is not None
    return {
        f"{k}_mib": round(v / 2**20, 1) for k, v in zip(("table", "indexes", "hnsw_index"), row, strict=True)
    }


def api_insert(client: httpx.Client, base: str, texts: list[str]) -> dict[str, Any]:
    """`texts` as new rows over the API, `PUT_ROWS` a request: rows/s."""
    started = time.perf_counter()
    for start in range(0, len(texts), PUT_ROWS):
        rows = [{"id": f"api{i}", "content": t} for i, t in enumerate(texts[start : start + PUT_ROWS], start)]
        check(
            client.put(
                f"{base}/api/projects/mindsdb/knowledge_bases/{KB}", json={"knowledge_base": {"rows": rows}}
            )
        )
    took = time.perf_counter() - started
    out = {
        "rows": len(texts),
        "seconds": round(took, 1),
        "rows_per_s": rate(len(texts), took),
        "load_average": load_average(),
    }
    print(f"  API insert: {len(texts):,} rows in {took:.1f}s ({out['rows_per_s']} rows/s)", flush=True)
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench search1m", description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--build", default="16:100", help="HNSW m:ef_construction")
    parser.add_argument("--maintenance-work-mem", default="4GB")
    parser.add_argument("--parallel-workers", type=int, default=2, help="max_parallel_maintenance_workers")
    parser.add_argument("--sweep", type=ints, default=[500, 600, 700, 800, 1000], help="SQL-only efs")
    parser.add_argument(
        "--http-ef", type=ints, help="ef_search over HTTP (default: the sweep's first >= 0.95)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="passes over the 300 queries (the first warms)")
    parser.add_argument("--api-rows", type=int, default=10_000, help="rows inserted over the API at the end")
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/agentkb-bench"))
    args = parser.parse_args(argv)
    m, ef_construction = (int(x) for x in args.build.split(":"))
    corpus = prepare(args.chunks, None, args.cache_dir)
    api_texts = [
        f"[api {i}] {corpus.texts[i % len(corpus.texts)][:EMBED_CHARS]}" for i in range(args.api_rows)
    ]
    embed = precomputed(api_texts)
    results: dict[str, Any] = dict(corpus.facts)
    load_before = load_average()
    started = time.perf_counter()
    with served_kb(corpus, embed) as (client, base, url, table):
        results["postgres"] = configure(url, args.maintenance_work_mem, args.parallel_workers)
        load_s = bulk_load(url, table, corpus.data, corpus.texts, corpus.sources)
        results["load"] = {
            "seconds": round(load_s, 1),
            "rows_per_s": rate(len(corpus.data), load_s),
            "load_average": load_average(),
        }
        build = measure_build(
            client, base, url, table, corpus, m, ef_construction, args.sweep, args.http_ef, args.rounds
        )
        results["builds"] = [build]
        results["memory"] = {**memory(base), **sizes(url, table), "load_average": load_average()}
        print(f"  memory: {results['memory']}", flush=True)
        misses = embed.misses
        results["api_insert"] = api_insert(client, base, api_texts) | {
            "stub_vectors_computed": embed.misses - misses
        }
    results["wall_s"] = round(time.perf_counter() - started, 1)
    load_after = load_average()
    print_table(
        f"search1m: {len(corpus.data):,} chunks, HNSW m {m} ef_construction {ef_construction} — the HNSW query "
        "alone (SQL, no HTTP)",
        build["sql_sweep"],
    )
    print_table("over HTTP (one query at a time)", build["http"])
    print(
        f"\nload {results['load']['rows_per_s']} rows/s, HNSW build {build['build_s']} s "
        f"(maintenance_work_mem {results['postgres']['maintenance_work_mem']}), memory {results['memory']}, "
        f"API insert {results['api_insert']['rows_per_s']} rows/s"
    )
    print(f"machine: {os.cpu_count()} CPUs, load average before {load_before}, after {load_after}")
    write_result(
        "search1m",
        {
            "chunks": len(corpus.data),
            "load_average_before": load_before,
            "load_average_after": load_after,
            **results,
        },
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
