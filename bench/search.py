"""Knowledge-base search latency and recall at scale, with the instant stub embedder (bench/stubs.py).

A KB of N generated chunks (~500 characters each, one chunk a row) embedded by `HashedBow` is built once
through the API (PUT in requests of 5,000 rows; the build is timed) and kept under
bench/.cache/search-kb-<N>/ (an agentkb data directory); later runs start the server on it again
(`--rebuild` builds it anew). Then Q queries (6 words of a random chunk + 2 random words) go through
`POST .../knowledge_bases/{kb}/search` over HTTP, one at a time from one client:

- vector only (`hybrid_search: false`) and hybrid (the default): p50/p95/p99 latency and QPS;
- recall@10 of the vector search against exact brute force (numpy dot products over the same vectors,
  computed in this process by the same deterministic function the stub serves);
- Chroma (if installed) with the same vectors and documents: add in batches, then query p50/p95 and
  recall@10.

    python -m bench search [--chunks 100000] [--queries 1000] [--quick] [--rebuild] [--profile]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common import CACHE, TextGenerator, check, print_table, rate, summary_ms, write_result
from bench.ingest import create_kb, make_rows
from bench.server import agentkb_server, cpu_delta, cpu_seconds, py_spy, top_frames
from bench.stubs import HashedBow, bench_stub

KB = "bench_search"
SEED = 7
BUILD_BATCH = 5000
WARMUP = 20


def make_queries(texts: list[str], n: int, seed: int = 11) -> list[str]:
    """Each query: 6 words from a random chunk, plus 2 words drawn from the whole vocabulary."""
    rng = np.random.default_rng(seed)
    vocabulary = TextGenerator(seed=seed)
    queries = []
    for _ in range(n):
        words = texts[int(rng.integers(len(texts)))].rstrip(".").replace(".", "").lower().split()
        picks = [words[int(i)] for i in rng.choice(len(words), size=min(6, len(words)), replace=False)]
        queries.append(" ".join(picks + vocabulary.draw(2)))
    return queries


def exact_top_k(vectors: np.ndarray, queries: np.ndarray, k: int = 10) -> list[set[int]]:
    truth = []
    for start in range(0, len(queries), 256):
        scores = queries[start : start + 256] @ vectors.T
        top = np.argpartition(-scores, k, axis=1)[:, :k]
        truth.extend(set(map(int, row)) for row in top)
    return truth


def recall(found: list[list[int]], truth: list[set[int]], k: int = 10) -> float:
    return float(np.mean([len(set(f[:k]) & t) / k for f, t in zip(found, truth, strict=True)]))


def build_kb(data_dir: Path, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Insert the rows into a new KB in `data_dir` through the API, with the stub; the timings."""
    if data_dir.exists():
        shutil.rmtree(data_dir)
    with (
        bench_stub() as stub,
        agentkb_server(data_dir=data_dir) as base,
        httpx.Client(timeout=3600) as client,
    ):
        create_kb(client, base.kbs, KB, stub.embedding_model())
        cpu = cpu_seconds(base)
        started = time.perf_counter()
        for start in range(0, len(rows), BUILD_BATCH):
            check(
                client.put(
                    f"{base.kbs}/{KB}", json={"knowledge_base": {"rows": rows[start : start + BUILD_BATCH]}}
                )
            )
            done = min(start + BUILD_BATCH, len(rows))
            elapsed = time.perf_counter() - started
            print(f"  built {done:,} rows in {elapsed:.0f}s ({done / elapsed:.0f} rows/s)", flush=True)
        seconds = time.perf_counter() - started
        meta = {
            "chunks": len(rows),
            "seconds": round(seconds, 2),
            "rows_per_s": round(len(rows) / seconds, 1),
            "cpu": cpu_delta(cpu, cpu_seconds(base)),
            "built": dt.datetime.now().isoformat(timespec="seconds"),
        }
    (data_dir / "bench-meta.json").write_text(json.dumps(meta, indent=2))
    return meta


def settle(
    client: httpx.Client,
    url: str,
    queries: list[str],
    body: dict[str, Any],
    fast_s: float,
    limit_s: float = 240.0,
) -> dict[str, Any]:
    """Warm-up: queries until 20 in a row each take under `fast_s` (at least WARMUP queries; at most
    `limit_s`). Hybrid search may build a lexical (BM25) index on its first use: this waits it out."""
    started = time.perf_counter()
    streak = sent = 0
    while sent < WARMUP or streak < 20:
        t = time.perf_counter()
        check(client.post(url, json={"query": queries[sent % len(queries)], **body}))
        streak = streak + 1 if time.perf_counter() - t < fast_s else 0
        sent += 1
        if time.perf_counter() - started > limit_s:
            break
    return {
        "warmup_queries": sent,
        "warmup_s": round(time.perf_counter() - started, 2),
        "settled": streak >= 20,
    }


def run_queries(
    client: httpx.Client, url: str, queries: list[str], body: dict[str, Any]
) -> tuple[list[float], float, list[list[int]]]:
    latencies: list[float] = []
    found: list[list[int]] = []
    started = time.perf_counter()
    for q in queries:
        t = time.perf_counter()
        response = check(client.post(url, json={"query": q, **body}))
        latencies.append(time.perf_counter() - t)
        found.append([int(hit["id"]) for hit in response.json()])
    return latencies, time.perf_counter() - started, found


def chroma_run(
    texts: list[str], vectors: np.ndarray, queries: np.ndarray, truth: list[set[int]]
) -> dict[str, Any] | None:
    try:
        import chromadb
    except ImportError:
        return None
    directory = tempfile.mkdtemp(prefix="chroma-bench-")
    try:
        client = chromadb.PersistentClient(path=directory)
        collection = client.create_collection(
            "bench_search", embedding_function=None, metadata={"hnsw:space": "cosine"}
        )
        batch = min(BUILD_BATCH, client.get_max_batch_size())
        started = time.perf_counter()
        for start in range(0, len(texts), batch):
            end = min(start + batch, len(texts))
            collection.add(
                ids=[str(i) for i in range(start, end)],
                embeddings=vectors[start:end],
                documents=texts[start:end],
                metadatas=[{"topic": f"topic{i % 16}"} for i in range(start, end)],
            )
        add_s = time.perf_counter() - started
        for q in queries[:WARMUP]:
            collection.query(query_embeddings=[q], n_results=10)
        latencies: list[float] = []
        found: list[list[int]] = []
        started = time.perf_counter()
        for q in queries:
            t = time.perf_counter()
            result = collection.query(query_embeddings=[q], n_results=10)
            latencies.append(time.perf_counter() - t)
            found.append([int(i) for i in result["ids"][0]])
        total = time.perf_counter() - started
        return {
            "version": chromadb.__version__,
            "add_s": add_s,
            "latencies": latencies,
            "total_s": total,
            "recall": recall(found, truth),
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench search", description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, help="KB size (default 100,000; --quick 10,000)")
    parser.add_argument("--queries", type=int, help="queries per mode (default 1,000; --quick 200)")
    parser.add_argument(
        "--hybrid-queries",
        type=int,
        help="queries for hybrid mode (default: as --queries); full text scans many rows at 100 k",
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rebuild", action="store_true", help="build the cached KB anew")
    parser.add_argument("--no-chroma", action="store_true")
    parser.add_argument(
        "--profile", action="store_true", help="py-spy the server during the vector-only queries"
    )
    args = parser.parse_args(argv)
    n = args.chunks or (10_000 if args.quick else 100_000)
    q_n = args.queries or (200 if args.quick else 1000)

    started = time.perf_counter()
    texts = TextGenerator(seed=SEED).texts(n)
    rows = make_rows(texts)
    embed = HashedBow()
    vectors = embed(texts)
    queries = make_queries(texts, q_n)
    query_vectors = embed(queries)
    truth = exact_top_k(vectors, query_vectors)
    print(
        f"search: {n:,} chunks, {q_n:,} queries; data, vectors and exact top-10 in {time.perf_counter() - started:.1f}s"
    )

    data_dir = CACHE / f"search-kb-{n}"
    meta_path = data_dir / "bench-meta.json"
    if args.rebuild or not meta_path.exists():
        print(f"building the KB in {data_dir} (PUT {BUILD_BATCH:,} rows a request, stub embedder)")
        build = build_kb(data_dir, rows)
        build["cached"] = False
    else:
        build = {**json.loads(meta_path.read_text()), "cached": True}
        print(f"reusing the KB built {build['built']} in {data_dir}")

    profile = (
        CACHE / "profiles" / f"search-vector-{dt.datetime.now():%Y%m%d-%H%M%S}.txt" if args.profile else None
    )
    results: dict[str, Any] = {}
    with bench_stub() as stub, agentkb_server(data_dir=data_dir) as base, httpx.Client(timeout=60) as client:
        # the stub listens on a new port each run: point the KB's embedding model at it (same model)
        check(
            client.put(
                f"{base.kbs}/{KB}",
                json={"knowledge_base": {"params": {"embedding_model": stub.embedding_model()}}},
            )
        )
        info = check(client.get(f"{base.kbs}/{KB}")).json()
        if info.get("chunk_count") != n:
            raise RuntimeError(
                f"cached KB holds {info.get('chunk_count')} chunks, expected {n}: run with --rebuild"
            )
        url = f"{base.kbs}/{KB}/search"
        stub_lat = []
        for q in queries[:200]:
            t = time.perf_counter()
            check(client.post(f"{stub.url}/embeddings", json={"model": "stub", "input": [q]}))
            stub_lat.append(time.perf_counter() - t)
        results["stub_embedding"] = summary_ms(stub_lat)
        hybrid_n = args.hybrid_queries or q_n
        for mode, body, count in (
            ("vector", {"limit": 10, "hybrid_search": False}, q_n),
            ("hybrid", {"limit": 10}, hybrid_n),
        ):
            fast = 0.25 if mode == "vector" else max(0.1, 4 * results["vector"]["p50_ms"] / 1000)
            warm = settle(client, url, queries, body, fast)
            print(f"  {mode}: warm-up {warm}", flush=True)
            cpu = cpu_seconds(base)
            with py_spy(base.pid, profile if mode == "vector" else None):
                latencies, total, found = run_queries(client, url, queries[:count], body)
            used = cpu_delta(cpu, cpu_seconds(base))
            results[mode] = {
                **summary_ms(latencies),
                "queries": count,
                "qps": rate(count, total),
                **warm,
                "recall_at_10": round(recall(found, truth[:count]), 4),
                "cpu_ms_per_query": {k: round(1000 * v / count, 2) for k, v in used.items()},
            }
            print(
                f"  {mode}: p50 {results[mode]['p50_ms']} ms, recall@10 {results[mode]['recall_at_10']}",
                flush=True,
            )

    chroma = None if args.no_chroma else chroma_run(texts, vectors, query_vectors, truth)
    if chroma is not None:
        results["chroma"] = {
            **summary_ms(chroma["latencies"]),
            "qps": rate(len(queries), chroma["total_s"]),
            "recall_at_10": round(chroma["recall"], 4),
            "add_s": round(chroma["add_s"], 2),
            "add_per_s": rate(n, chroma["add_s"]),
            "version": chroma["version"],
        }

    hybrid_queries = results["hybrid"]["queries"]
    hybrid_note = "" if hybrid_queries == q_n else f", first {hybrid_queries} queries"
    table = []
    for name, label in (
        ("vector", "agentkb vector (hybrid_search false)"),
        ("hybrid", "agentkb hybrid (default)" + hybrid_note),
        ("chroma", f"Chroma {chroma['version'] if chroma else ''} vector"),
    ):
        if name not in results:
            continue
        r = results[name]
        table.append(
            {
                "engine / mode": label,
                "p50_ms": r["p50_ms"],
                "p95_ms": r["p95_ms"],
                "p99_ms": r["p99_ms"],
                "qps": r["qps"],
                "recall@10 vs exact": r["recall_at_10"] if name != "hybrid" else "n/a (fused)",
                "server cpu ms/query": (
                    f"{r['cpu_ms_per_query']['server_python_cpu_s']} + pg "
                    f"{r['cpu_ms_per_query']['postgres_cpu_s']}"
                )
                if "cpu_ms_per_query" in r
                else "in-process",
            }
        )
    print_table(
        f"search: {n:,} chunks (384-d, stub embedder), {q_n:,} sequential queries, limit 10, over HTTP", table
    )
    print("\ntargets at 100 k: p50 ≤ 5 ms, p95 ≤ 15 ms, recall@10 ≥ 0.95")
    print(
        f"warm-up before measuring: vector {results['vector']['warmup_queries']} queries / "
        f"{results['vector']['warmup_s']}s, hybrid {results['hybrid']['warmup_queries']} queries / "
        f"{results['hybrid']['warmup_s']}s (until 20 in a row are fast: a first hybrid search may build an index)"
    )
    print(
        f"stub /v1/embeddings round trip from this process (1 text): p50 {results['stub_embedding']['p50_ms']} ms"
    )
    source = "cached, built" if build["cached"] else "built"
    print(
        f"KB build ({source} {build['built']}): {build['chunks']:,} rows in {build['seconds']:.0f}s "
        f"= {build['rows_per_s']} rows/s through PUT ({BUILD_BATCH:,} rows a request)"
    )
    if chroma is not None:
        print(
            f"Chroma add: {n:,} vectors + documents in {chroma['add_s']:.1f}s = {results['chroma']['add_per_s']} per s"
        )
    if profile is not None and profile.exists():
        print(
            f"\npy-spy of the server (vector queries), {profile}\n  % of samples in stack, % innermost, frame:"
        )
        for frame, inclusive, own in top_frames(profile, 30, interesting=True):
            print(f"  {inclusive:5.1f} {own:5.1f}  {frame}")
    write_result(
        "search",
        {
            "model": "stub HashedBow 384-d (bench/stubs.py)",
            "quick": args.quick,
            "chunks": n,
            "queries": q_n,
            "build": build,
            "results": results,
            "table": table,
            "profile": str(profile) if profile else None,
        },
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
