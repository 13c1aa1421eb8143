"""HTTP throughput under concurrency: requests/s and latency with 32 concurrent clients.

Two endpoints of one server (`agentkb serve`, fresh data directory):

- `GET /api/projects/mindsdb/agents` with `--agents` agents stored (default 20);
- `POST /api/projects/mindsdb/agents/{a}/completions` with the default `extractive` model (no LLM: its
  planner calls `kb_list_tool`, then `kb_query_tool` = one hybrid KB search) over a small KB of `--rows`
  generated rows embedded by the instant stub embedder (bench/stubs.py); requests rotate over the agents
  and over a few dozen questions. Each completion also stores its trace.

The load generator runs in its own process (`python -m bench.http --loadgen`, spec on stdin, result on
stdout), apart from the server (a subprocess) and from this process (which serves the stub embedder in
a thread): `--concurrency` workers (default 32) share one `httpx.AsyncClient` over loopback, after a
short warm-up, each sending its next request as soon as the last one answered, until `--duration`
seconds (default 10; --quick 3) or `--max-requests` requests have been sent. Latency is per request,
from send to the whole body read; requests/s counts the answered requests over the time to the last one.

    python -m bench http [--duration 10] [--concurrency 32] [--agents 20] [--rows 48] [--quick] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    CACHE,
    TextGenerator,
    check,
    ingest_counts,
    print_table,
    rate,
    summary_ms,
    write_result,
)

PROJECT = "mindsdb"
KB = "bench_http_kb"
AGENT_PREFIX = "bench_http_agent_"
SEED = 21


# --- the load generator (its own process) --------------------------------------------------------------


async def _load(spec: dict[str, Any]) -> dict[str, Any]:
    import psutil

    method, url, bodies = spec["method"], spec["url"], spec.get("bodies") or [None]
    # an answered request (2xx) whose body lacks `ok_pattern` or holds `error_pattern` is an error
    ok = re.compile(spec["ok_pattern"]) if spec.get("ok_pattern") else None
    bad = re.compile(spec["error_pattern"]) if spec.get("error_pattern") else None
    urls = spec.get("urls") or [url]
    concurrency, duration, max_requests = spec["concurrency"], spec["duration_s"], spec["max_requests"]
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    latencies: list[float] = []
    answered_at: list[
        float
    ] = []  # when each answer without error came, from the start of the measured window
    statuses: dict[str, int] = {}
    errors: list[str] = []  # samples
    failures = 0
    sent = 0
    window_start = time.perf_counter()

    async with httpx.AsyncClient(limits=limits, timeout=spec.get("timeout_s", 60)) as client:

        async def worker(deadline: float, cap: int, record: bool) -> None:
            nonlocal sent, failures
            while time.perf_counter() < deadline and sent < cap:
                i = sent
                sent += 1
                body = bodies[i % len(bodies)]
                target = urls[i % len(urls)]
                started = time.perf_counter()
                try:
                    response = await client.request(method, target, json=body)
                    await response.aread()
                except httpx.HTTPError as exc:
                    if record:
                        failures += 1
                        if len(errors) < 1000:
                            errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                elapsed = time.perf_counter() - started
                if not record:
                    continue
                statuses[str(response.status_code)] = statuses.get(str(response.status_code), 0) + 1
                failed = response.status_code >= 300
                if not failed and (ok or bad):
                    answer = response.text
                    failed = bool((ok and not ok.search(answer)) or (bad and bad.search(answer)))
                if not failed:
                    latencies.append(elapsed)
                    answered_at.append(time.perf_counter() - window_start)
                    continue
                failures += 1
                if len(errors) < 1000:  # an answer's start and end (a stream's error chunk is at its end)
                    text = response.text
                    errors.append(
                        f"{response.status_code}: {text if len(text) <= 600 else text[:200] + ' … ' + text[-400:]}"
                    )

        # warm-up: opens the connections and lets the server settle; not recorded
        warm_until = time.perf_counter() + spec.get("warmup_s", 1.0)
        await asyncio.gather(*(worker(warm_until, 10**9, False) for _ in range(concurrency)))
        sent = 0
        me = psutil.Process()
        cpu = me.cpu_times()
        started = window_start = time.perf_counter()
        await asyncio.gather(*(worker(started + duration, max_requests, True) for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
        used = me.cpu_times()
    return {
        "duration_s": duration,
        "latencies_s": latencies,
        "answered_in_window": sum(1 for t in answered_at if t <= duration),
        "sent": sent,
        "elapsed_s": elapsed,
        "statuses": statuses,
        "errors": failures,
        "error_samples": errors[:5],
        "loadgen_cpu_s": round((used.user + used.system) - (cpu.user + cpu.system), 3),
    }


def loadgen_main() -> None:
    spec = json.loads(sys.stdin.read())
    result = asyncio.run(_load(spec))
    sys.stdout.write(json.dumps(result))


def run_load(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the load generator in a new process and return its result (see `_load`)."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.http", "--loadgen"],
        check=False,
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=spec["duration_s"] + spec.get("warmup_s", 1) + 300,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"load generator failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def summarise(load: dict[str, Any]) -> dict[str, Any]:
    """A load's figures for a result file: requests answered without error, errors (count, samples),
    statuses, seconds, requests/s (`rps`), latency percentiles, the load generator's CPU."""
    done = len(load["latencies_s"])
    return {
        "requests": done,
        "errors": load["errors"],
        "error_samples": load["error_samples"],
        "statuses": load["statuses"],
        "seconds": round(load["elapsed_s"], 3),
        "rps": rate(done, load["elapsed_s"]),
        # the answers that came within the load's duration, over it: a server whose last requests hang until
        # their timeout is not credited with the time they took (`rps` waits for them)
        "rps_in_window": rate(load["answered_in_window"], load["duration_s"])
        if "answered_in_window" in load
        else None,
        **summary_ms(load["latencies_s"]),
        "loadgen_cpu_s": load["loadgen_cpu_s"],
    }


# --- the benchmark ---------------------------------------------------------------------------------------


def pg_sessions(data_dir: Path) -> int | None:
    """Sessions ended so far on the embedded PostgreSQL of a server (`pg_stat_database.sessions`, counted
    when a connection closes), less the one this call opens; None if it cannot be read. A pool that
    opens and closes connections under load (overflow beyond its size) shows up here."""
    try:
        import psycopg

        lines = (data_dir / "pg" / "postmaster.pid").read_text().splitlines()
        with psycopg.connect(
            host=lines[4],
            port=lines[3],
            user="postgres",
            dbname="postgres",
            autocommit=True,
            connect_timeout=5,
        ) as conn:
            row = conn.execute("SELECT sum(sessions) FROM pg_stat_database").fetchone()
        return int(row[0]) if row and row[0] is not None else None
    except Exception:  # noqa: BLE001 - an external PostgreSQL, or no permission: just not reported
        return None


def questions(n: int, seed: int = SEED) -> list[str]:
    generator = TextGenerator(seed=seed + 1)
    return [" ".join(generator.draw(6)) + "?" for _ in range(n)]


def setup(client: Any, base: Any, stub: Any, agents: int, rows: int) -> None:
    """A KB of `rows` generated rows (stub embedder) and `agents` extractive agents over it."""
    from bench.ingest import create_kb, make_rows

    create_kb(client, base.kbs, KB, stub.embedding_model())
    response = check(
        client.put(
            f"{base.kbs}/{KB}",
            json={"knowledge_base": {"rows": make_rows(TextGenerator(seed=SEED).texts(rows))}},
        )
    )
    counts = ingest_counts(response.headers.get("x-agentkb-ingest"))
    if counts.get("chunks") != rows:
        raise RuntimeError(f"the KB got {counts} for {rows} rows")
    for i in range(agents):
        check(
            client.post(
                f"{base}/api/projects/{PROJECT}/agents",
                json={
                    "agent": {
                        "name": f"{AGENT_PREFIX}{i:02d}",
                        "data": {"knowledge_bases": [f"{PROJECT}.{KB}"], "tables": []},
                    }
                },
            )
        )


def main(argv: list[str]) -> None:
    from bench.server import agentkb_server, cpu_delta, cpu_seconds, py_spy, top_frames
    from bench.stubs import bench_stub

    parser = argparse.ArgumentParser(prog="python -m bench http", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, help="seconds of load per endpoint (default 10; --quick 3)")
    parser.add_argument(
        "--max-requests", type=int, help="request cap per endpoint (default 50,000; --quick 10,000)"
    )
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--rows", type=int, default=48, help="rows in the agents' KB")
    parser.add_argument("--warmup", type=float, help="warm-up seconds per endpoint (default 2; --quick 1)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--profile", action="store_true", help="py-spy the server under each load")
    args = parser.parse_args(argv)
    duration = args.duration or (3.0 if args.quick else 10.0)
    max_requests = args.max_requests or (10_000 if args.quick else 50_000)
    warmup = args.warmup if args.warmup is not None else (1.0 if args.quick else 2.0)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())

    print(
        f"http: {args.concurrency} concurrent clients, {duration:g}s per endpoint (cap {max_requests:,} requests), "
        f"{args.agents} agents, KB of {args.rows} rows (stub embedder)",
        flush=True,
    )
    results: dict[str, Any] = {}
    profiles: dict[str, str] = {}
    with bench_stub() as stub, agentkb_server() as base, httpx.Client(timeout=60) as client:
        setup(client, base, stub, args.agents, args.rows)
        agents_url = f"{base}/api/projects/{PROJECT}/agents"
        listed = check(client.get(agents_url)).json()
        if len(listed) != args.agents:
            raise RuntimeError(f"listed {len(listed)} agents, expected {args.agents}")
        asked = questions(40)
        probe = check(
            client.post(
                f"{agents_url}/{AGENT_PREFIX}00/completions",
                json={"messages": [{"question": asked[0], "answer": None}]},
            )
        ).json()
        if not probe["message"]["content"].startswith("Based on the knowledge base"):
            raise RuntimeError(f"unexpected extractive answer: {probe['message']['content'][:300]}")
        list_bytes = len(check(client.get(agents_url)).content)
        endpoints = {
            "list_agents": {
                "method": "GET",
                "url": agents_url,
                "label": f"GET .../agents ({args.agents} agents, {list_bytes / 1024:.1f} KiB)",
            },
            "completion_extractive": {
                "method": "POST",
                "url": "",
                "urls": [
                    f"{agents_url}/{AGENT_PREFIX}{i % args.agents:02d}/completions" for i in range(len(asked))
                ],
                "bodies": [{"messages": [{"question": q, "answer": None}]} for q in asked],
                "label": f"POST .../agents/{{a}}/completions (extractive, KB {args.rows} rows)",
            },
        }
        for name, endpoint in endpoints.items():
            spec = {k: v for k, v in endpoint.items() if k != "label"}
            spec.update(
                concurrency=args.concurrency, duration_s=duration, max_requests=max_requests, warmup_s=warmup
            )
            profile = CACHE / "profiles" / f"http-{name}-{stamp}.txt" if args.profile else None
            embeds_before = stub.embedding_requests
            sessions = pg_sessions(base.data_dir)
            cpu = cpu_seconds(base)
            with py_spy(base.pid, profile):
                load = run_load(spec)
            used = cpu_delta(cpu, cpu_seconds(base))
            time.sleep(0.5)
            after = pg_sessions(base.data_dir)
            churn = after - sessions - 1 if after is not None and sessions is not None else None
            done = len(load["latencies_s"])
            results[name] = {
                "label": endpoint["label"],
                **summarise(load),
                "server_cpu_ms_per_request": {k: round(1000 * v / max(done, 1), 3) for k, v in used.items()},
                "server_cpu_s": used,
                "stub_embedding_requests": stub.embedding_requests - embeds_before,
                "pg_connections_closed": churn,
            }
            if profile is not None and profile.exists():
                profiles[name] = str(profile)
            r = results[name]
            print(
                f"  {name}: {done:,} requests in {r['seconds']}s = {r['rps']} req/s, p50 {r['p50_ms']} ms, "
                f"p95 {r['p95_ms']} ms, errors {r['errors']}",
                flush=True,
            )

    table = [
        {
            "endpoint": r["label"],
            "clients": args.concurrency,
            "requests": r["requests"],
            "errors": r["errors"],
            "req/s": r["rps"],
            "p50_ms": r["p50_ms"],
            "p95_ms": r["p95_ms"],
            "p99_ms": r["p99_ms"],
            "server cpu ms/req (python + pg)": _cpu_cell(r["server_cpu_ms_per_request"]),
            "pg connections closed": r["pg_connections_closed"],
            "loadgen cpu s / wall s": f"{r['loadgen_cpu_s']} / {r['seconds']}",
        }
        for r in results.values()
    ]
    print_table(
        f"http: {args.concurrency} concurrent httpx.AsyncClient workers on loopback, {duration:g}s per endpoint "
        f"(load generator in its own process)",
        table,
    )
    print(
        f"\nmachine: {os.cpu_count()} CPUs shared by the server, its PostgreSQL, the stub and the load generator "
        f"(load average before the run: {load_before})"
    )
    print(
        "pg cpu counts live PostgreSQL processes only: connections closed during the load take their CPU with "
        "them (n/a when the delta went negative)"
    )
    for name, path in profiles.items():
        print(f"\npy-spy of the server ({name}), {path}\n  % of samples in stack, % innermost, frame:")
        for frame, inclusive, own in top_frames(Path(path), 25, interesting=True):
            print(f"  {inclusive:5.1f} {own:5.1f}  {frame}")
    write_result(
        "http",
        {
            "quick": args.quick,
            "load_average_before": load_before,
            "concurrency": args.concurrency,
            "duration_s": duration,
            "max_requests": max_requests,
            "warmup_s": warmup,
            "agents": args.agents,
            "kb_rows": args.rows,
            "results": results,
            "table": table,
            "profiles": profiles,
        },
    )


def _cpu_cell(per_request: dict[str, float]) -> str:
    pg = per_request["postgres_cpu_s"]
    return f"{per_request['server_python_cpu_s']} + {pg if pg >= 0 else 'n/a'}"


if __name__ == "__main__":
    if sys.argv[1:] == ["--loadgen"]:
        loadgen_main()
    else:
        main(sys.argv[1:])
