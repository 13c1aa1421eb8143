"""Throughput and latency at 32 concurrent clients, `agentkb serve` with 1 process and with `--workers 2`.

For each process count, a fresh server (embedded PostgreSQL; with `--workers 2` the parent runs it for both
processes) gets the data of `python -m bench http` (a KB of `--rows` generated rows embedded by the instant
stub embedder, `--agents` extractive agents over it), then three loads, each `--concurrency` clients for
`--duration` seconds after a warm-up, from the load generator of `bench.http` (its own process):

- `GET /api/projects/mindsdb/agents` (list agents);
- `POST .../knowledge_bases/{kb}/search` (hybrid search, rotating over a few dozen queries);
- `POST .../agents/{a}/completions` with the `extractive` model (no LLM: one KB search and a trace write).

Every connection of the load generator is opened before the measured window (warm-up); the kernel spreads
new connections over the processes sharing the listening socket, so with `--workers 2` the clients are
split between them. The load average before each load is recorded with the figures: on a shared machine
they move with it.

    python -m bench clients [--duration 10] [--concurrency 32] [--workers 1,2] [--quick]
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import httpx

from bench.common import check, print_table, rate, summary_ms, write_result
from bench.http import AGENT_PREFIX, KB, PROJECT, questions, run_load, setup


def _load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str]) -> None:
    from bench.server import agentkb_server
    from bench.stubs import bench_stub

    parser = argparse.ArgumentParser(prog="python -m bench clients", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, help="seconds of load per endpoint (default 10; --quick 3)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", default="1,2", help="process counts to compare (default 1,2)")
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--rows", type=int, default=48, help="rows in the KB")
    parser.add_argument("--warmup", type=float, help="warm-up seconds per endpoint (default 2; --quick 1)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    duration = args.duration or (3.0 if args.quick else 10.0)
    warmup = args.warmup if args.warmup is not None else (1.0 if args.quick else 2.0)
    counts = [int(n) for n in args.workers.split(",")]
    print(
        f"clients: {args.concurrency} concurrent clients, {duration:g}s per endpoint, serve with "
        f"{' vs '.join(map(str, counts))} process(es)",
        flush=True,
    )
    results: list[dict[str, Any]] = []
    for workers in counts:
        serve_args = ["--workers", str(workers)] if workers > 1 else []
        with (
            bench_stub() as stub,
            agentkb_server(args=serve_args) as base,
            httpx.Client(timeout=60) as client,
        ):
            setup(client, base, stub, args.agents, args.rows)
            agents_url = f"{base}/api/projects/{PROJECT}/agents"
            asked = questions(40)
            endpoints: dict[str, dict[str, Any]] = {
                "list agents": {"method": "GET", "url": agents_url},
                "search": {
                    "method": "POST",
                    "url": f"{base.kbs}/{KB}/search",
                    "bodies": [{"query": q, "limit": 10} for q in asked],
                },
                "completion (extractive)": {
                    "method": "POST",
                    "url": "",
                    "urls": [
                        f"{agents_url}/{AGENT_PREFIX}{i % args.agents:02d}/completions"
                        for i in range(len(asked))
                    ],
                    "bodies": [{"messages": [{"question": q, "answer": None}]} for q in asked],
                },
            }
            check(client.post(f"{base.kbs}/{KB}/search", json={"query": asked[0]}))
            for name, spec in endpoints.items():
                load_before = _load_average()
                load = run_load(
                    {
                        **spec,
                        "concurrency": args.concurrency,
                        "duration_s": duration,
                        "max_requests": 10**7,
                        "warmup_s": warmup,
                    }
                )
                done = len(load["latencies_s"])
                row = {
                    "endpoint": name,
                    "processes": workers,
                    "clients": args.concurrency,
                    "requests": done,
                    "errors": load["errors"],
                    "req/s": rate(done, load["elapsed_s"]),
                    **{k: v for k, v in summary_ms(load["latencies_s"]).items() if k in ("p50_ms", "p95_ms")},
                    "load average before": load_before,
                }
                results.append(row | {"error_samples": load["error_samples"]})
                print(
                    f"  {workers} process(es), {name}: {row['req/s']} req/s, p95 {row['p95_ms']} ms, "
                    f"errors {row['errors']} (load average before: {load_before})",
                    flush=True,
                )
    table = [{k: v for k, v in r.items() if k != "error_samples"} for r in sorted(results, key=_order)]
    print_table(
        f"clients: {args.concurrency} concurrent clients, {duration:g}s per endpoint, 1 vs 2 server processes",
        table,
    )
    print(
        f"\nmachine: {os.cpu_count()} CPUs shared by the servers, PostgreSQL, the stub and the load generator"
    )
    write_result(
        "clients",
        {
            "quick": args.quick,
            "concurrency": args.concurrency,
            "duration_s": duration,
            "warmup_s": warmup,
            "agents": args.agents,
            "kb_rows": args.rows,
            "results": results,
            "table": table,
        },
    )


def _order(row: dict[str, Any]) -> tuple[str, int]:
    return (str(row["endpoint"]), int(row["processes"]))
