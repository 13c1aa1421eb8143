"""agentkb against a MindsDB-compatible peer: the same HTTP workload on both, with the same instant stubs.

The workload, run against agentkb (`agentkb serve`, fresh data directory) and, with `--peer-url`, against
any server speaking MindsDB's HTTP API (e.g. MindsDB itself, already running):

1. create a knowledge base whose `embedding_model` is the instant stub embedder
   (`{"provider": "openai", "model_name": "stub", "base_url": <stub>/v1, "api_key": "x", "dimensions": 384}`);
2. insert `--rows` generated rows (default 10,000; --quick 2,000; ~500 characters each) in PUTs of
   `--batch` rows (1,000);
3. `--searches` KB searches (200), one at a time, through `POST /api/sql/query`
   `SELECT * FROM mindsdb.<kb> WHERE content = '...' LIMIT 10`;
4. create an agent over the KB whose model is the scripted stub LLM (`{"provider": "openai",
   "model_name": "stub", "base_url", "api_key"}`; one `kb_query_tool` call, then a fixed answer), and run
   `--completions` streamed completions (20) one at a time: time to the first `data:` line and to `end`.

Both servers talk to the same stubs (one process, a thread of this one), so the stubs must be reachable
from the peer: `--stub-host 0.0.0.0 --stub-public-host <this machine's address>` when the peer runs
elsewhere (in a container: e.g. `host.docker.internal`). Without `--peer-url` only agentkb is measured
and the peer column says so.

    python -m bench peer [--peer-url http://127.0.0.1:47334] [--rows 10000] [--quick] [--stub-host H]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import httpx

from bench.agent import Client, chunk_kinds
from bench.common import TextGenerator, print_table, rate, summary_ms, write_result
from bench.stubs import bench_stub, kb_tool_then_answer
from tests.openai_stub import OpenAIStub

PROJECT = "mindsdb"
KB = "bench_peer_kb"
AGENT = "bench_peer_agent"
SEED = 41


def _ok(response: httpx.Response, what: str) -> httpx.Response:
    if response.status_code >= 300:
        raise RuntimeError(
            f"{what}: {response.request.method} {response.request.url} -> {response.status_code}: "
            f"{response.text[:500]}"
        )
    return response


def _sql(client: httpx.Client, base: str, query: str) -> dict[str, Any]:
    answer = _ok(
        client.post(f"{base}/api/sql/query", json={"query": query, "context": {"db": PROJECT}}), "SQL"
    ).json()
    if answer.get("type") == "error":
        raise RuntimeError(f"SQL {query[:120]!r}: {answer.get('error_message')}")
    return answer


def workload(
    base: str,
    stub: OpenAIStub,
    rows: list[dict[str, Any]],
    batch: int,
    queries: list[str],
    completions: int,
    questions: list[str],
) -> dict[str, Any]:
    """The workload against one server at `base`; timings and checks."""
    out: dict[str, Any] = {}
    kbs = f"{base}/api/projects/{PROJECT}/knowledge_bases"
    agents = f"{base}/api/projects/{PROJECT}/agents"
    with httpx.Client(timeout=httpx.Timeout(1800, connect=30)) as client:
        # leftovers of an earlier run on a long-lived peer
        client.delete(f"{agents}/{AGENT}")
        client.delete(f"{kbs}/{KB}")

        started = time.perf_counter()
        _ok(
            client.post(
                kbs,
                json={
                    "knowledge_base": {
                        "name": KB,
                        "embedding_model": stub.embedding_model(),
                        "id_column": "id",
                        "content_columns": ["body"],
                        "metadata_columns": ["topic"],
                    }
                },
            ),
            "create KB",
        )
        out["create_kb_ms"] = round((time.perf_counter() - started) * 1000, 2)

        puts: list[float] = []
        embeds = stub.texts
        started = time.perf_counter()
        for start in range(0, len(rows), batch):
            t = time.perf_counter()
            _ok(
                client.put(f"{kbs}/{KB}", json={"knowledge_base": {"rows": rows[start : start + batch]}}),
                "insert",
            )
            puts.append(time.perf_counter() - t)
        seconds = time.perf_counter() - started
        out["insert"] = {
            "rows": len(rows),
            "seconds": round(seconds, 3),
            "rows_per_s": rate(len(rows), seconds),
            "put": summary_ms(puts),
            "stub_texts_embedded": stub.texts - embeds,
        }
        print(
            f"    inserted {len(rows):,} rows in {seconds:.1f}s ({out['insert']['rows_per_s']} rows/s)",
            flush=True,
        )

        for q in queries[:5]:  # warm-up
            _sql(client, base, f"SELECT * FROM {PROJECT}.{KB} WHERE content = '{q}' LIMIT 10")
        latencies: list[float] = []
        empty = 0
        started = time.perf_counter()
        for q in queries:
            t = time.perf_counter()
            answer = _sql(client, base, f"SELECT * FROM {PROJECT}.{KB} WHERE content = '{q}' LIMIT 10")
            latencies.append(time.perf_counter() - t)
            empty += not answer.get("data")
        seconds = time.perf_counter() - started
        out["search"] = {
            **summary_ms(latencies),
            "queries": len(queries),
            "qps": rate(len(queries), seconds),
            "empty_answers": empty,
        }
        print(f"    {len(queries)} SQL KB searches: p50 {out['search']['p50_ms']} ms", flush=True)

        _ok(
            client.post(
                agents,
                json={
                    "agent": {
                        "name": AGENT,
                        "model": stub.chat_model(),
                        "data": {"knowledge_bases": [f"{PROJECT}.{KB}"], "tables": []},
                    }
                },
            ),
            "create agent",
        )
        streamer = Client(base)
        try:
            body = {"messages": [{"question": questions[0], "answer": None}]}
            streamer.stream(f"/api/projects/{PROJECT}/agents/{AGENT}/completions/stream", body)  # warm-up
            first, end, outputs = [], [], 0
            sequences: dict[str, int] = {}
            chats = stub.chat_requests
            for i in range(completions):
                body = {"messages": [{"question": questions[(i + 1) % len(questions)], "answer": None}]}
                t = streamer.stream(f"/api/projects/{PROJECT}/agents/{AGENT}/completions/stream", body)
                if t["first_data_s"] is not None:
                    first.append(t["first_data_s"])
                if t["end_s"] is not None:
                    end.append(t["end_s"])
                kinds = chunk_kinds(t["chunks"])
                outputs += "output" in kinds
                sequences[",".join(kinds)] = sequences.get(",".join(kinds), 0) + 1
        finally:
            streamer.close()
        out["stream"] = {
            "completions": completions,
            "start": summary_ms(first),
            "end": summary_ms(end),
            "with_output": outputs,
            "chunk_sequences": sequences,
            "stub_chat_requests": stub.chat_requests - chats,
        }
        print(
            f"    {completions} streamed completions: start p50 {out['stream']['start']['p50_ms']} ms, "
            f"end p50 {out['stream']['end']['p50_ms']} ms, sequences {sequences}",
            flush=True,
        )

        client.delete(f"{agents}/{AGENT}")
        client.delete(f"{kbs}/{KB}")
    return out


def main(argv: list[str]) -> None:
    from bench.ingest import make_rows
    from bench.search import make_queries
    from bench.server import agentkb_server, cpu_delta, cpu_seconds

    parser = argparse.ArgumentParser(prog="python -m bench peer", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--peer-url", help="base URL of a running MindsDB-compatible server (none: agentkb only)"
    )
    parser.add_argument("--rows", type=int, help="rows to insert (default 10,000; --quick 2,000)")
    parser.add_argument("--batch", type=int, default=1000, help="rows per PUT")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--completions", type=int, default=20)
    parser.add_argument("--stub-host", default="127.0.0.1", help="address the stubs listen on")
    parser.add_argument(
        "--stub-public-host", help="host name the servers reach the stubs at (default: --stub-host)"
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    n = args.rows or (2000 if args.quick else 10_000)
    load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())

    texts = TextGenerator(seed=SEED).texts(n)
    rows = make_rows(texts)
    queries = [q.replace("'", "") for q in make_queries(texts, args.searches, seed=SEED + 1)]
    questions = [q.replace("'", "") for q in make_queries(texts, args.completions + 1, seed=SEED + 2)]
    print(
        f"peer: {n:,} rows in PUTs of {args.batch:,}, {args.searches} SQL KB searches, {args.completions} streamed "
        f"completions; peer {args.peer_url or 'not given'}",
        flush=True,
    )

    results: dict[str, Any] = {}
    with bench_stub(
        chat_script=kb_tool_then_answer(f"{PROJECT}.{KB}"),
        bind=args.stub_host,
        public_host=args.stub_public_host,
    ) as stub:
        print(f"  stubs at {stub.url}", flush=True)
        print("  agentkb:", flush=True)
        with agentkb_server() as base:
            cpu = cpu_seconds(base)
            results["agentkb"] = workload(base, stub, rows, args.batch, queries, args.completions, questions)
            results["agentkb"]["server_cpu_s"] = cpu_delta(cpu, cpu_seconds(base))
        if args.peer_url:
            print(f"  peer {args.peer_url}:", flush=True)
            peer_base = args.peer_url.rstrip("/")
            status = httpx.get(f"{peer_base}/api/status", timeout=30)
            results["peer"] = workload(
                peer_base, stub, rows, args.batch, queries, args.completions, questions
            )
            results["peer"]["status"] = status.json() if status.status_code == 200 else status.status_code

    a, p = results["agentkb"], results.get("peer")
    metrics = [
        ("create KB (ms)", lambda r: r["create_kb_ms"], "lower"),
        (
            f"insert {n:,} rows, PUTs of {args.batch:,} (rows/s)",
            lambda r: r["insert"]["rows_per_s"],
            "higher",
        ),
        ("insert: one PUT p50 (ms)", lambda r: r["insert"]["put"]["p50_ms"], "lower"),
        (
            f"SQL KB search LIMIT 10 p50 (ms), {args.searches} sequential",
            lambda r: r["search"]["p50_ms"],
            "lower",
        ),
        ("SQL KB search p95 (ms)", lambda r: r["search"]["p95_ms"], "lower"),
        ("SQL KB search (queries/s)", lambda r: r["search"]["qps"], "higher"),
        (
            f"stream: first data: line p50 (ms), {args.completions} runs",
            lambda r: r["stream"]["start"]["p50_ms"],
            "lower",
        ),
        ("stream: end chunk p50 (ms)", lambda r: r["stream"]["end"]["p50_ms"], "lower"),
        ("stream: end chunk p95 (ms)", lambda r: r["stream"]["end"]["p95_ms"], "lower"),
    ]
    table = []
    for label, get, better in metrics:
        mine = get(a)
        theirs = get(p) if p else None
        ratio = round(mine / theirs, 3) if theirs else None
        table.append(
            {
                "measure": label,
                "agentkb": mine,
                "peer": theirs if p else "not measured",
                "agentkb / peer": ratio if ratio is not None else "n/a",
                "agentkb better when": "ratio > 1" if better == "higher" else "ratio < 1",
            }
        )
    print_table(f"peer: agentkb vs {args.peer_url or '(no peer)'}, same workload, same instant stubs", table)
    print(f"\nmachine: {os.cpu_count()} CPUs (load average before the run: {load_before})")
    if not p:
        print(
            "\nthe peer was not measured (no --peer-url): agentkb only. Start a MindsDB-compatible server and "
            "pass --peer-url to compare."
        )
    write_result(
        "peer",
        {
            "quick": args.quick,
            "load_average_before": load_before,
            "rows": n,
            "batch": args.batch,
            "searches": args.searches,
            "completions": args.completions,
            "peer_url": args.peer_url,
            "peer_measured": bool(p),
            "results": results,
            "table": table,
        },
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
