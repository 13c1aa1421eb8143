"""`python -m bench peer --clients N`: agentkb and the peer under N concurrent clients, the same three loads
on both in one run: throughput, p50/p95/p99 latency, errors, and agentkb's throughput over the peer's.

Both servers get the single-client run's KB (`--rows` generated rows in PUTs of `--batch`, embedded by the
instant stub embedder from vectors computed before the run) and its agent (the scripted stub LLM: one KB
search, then a fixed answer); agentkb runs as `agentkb serve --workers W` (`--workers`, default 2). Then,
on each server, `--clients` clients for `--duration` seconds per load after a `--warmup`, from the load
generator of `bench.http` (a process of its own; each client sends its next request when its last one is
answered, over a kept-alive connection), once agentkb's background HNSW index merge of the load is done
(`bench.peer_setup.settle`; its wait in the result file):

- SQL KB search: `POST /api/sql/query` `SELECT * FROM mindsdb.<kb> WHERE content = '<query>' LIMIT 10`,
  rotating over the single-client run's queries; an answer of type `error` counts as an error;
- list agents: `GET /api/projects/mindsdb/agents`;
- streamed completion: `POST /api/projects/mindsdb/agents/<agent>/completions/stream`, read to its end;
  one without an answer (agentkb's `output` chunk, MindsDB's `data` one) and an `end` chunk, or with an
  error chunk, counts as an error.

After the loads, whether each server still answers (lists its agents within 10 s) is recorded.

Throughput counts the requests answered without error within the load's duration, over that duration
(the ratio is taken on it); the result also has them all over the time to the last answer, which waits
for requests still running at the end, up to their timeout. Latency is the answered requests', from sending
to the whole body read. Errors (HTTP status, a failed connection or timeout after
`--request-timeout` seconds, an error in the answer) are counted and sampled in the result file.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import httpx

from bench.common import machine_line, machine_speed, print_table, speed_fields, write_result
from bench.http import run_load, summarise
from bench.peer_setup import AGENT, KB, PROJECT, create_agent, create_kb, drop, insert, settle
from tests.openai_stub import OpenAIStub

ERROR_ANSWER = r'"type"\s*:\s*"error"'  # a SQL answer of type error, an error chunk of a stream
# a stream that answered and ended: an `end` chunk, and agentkb's `output` chunk or MindsDB's `data` one
STREAM_ANSWERED = r'(?s)^(?=.*"type"\s*:\s*"end")(?=.*("output"|"type"\s*:\s*"data"))'
LOADS = ("SQL KB search", "list agents", "streamed completion")  # in this order: the heaviest last
AFTER_TIMEOUT_S = 10.0  # the check that a server still answers after the loads, and the clean-up


def _load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def specs(base: str, queries: list[str], questions: list[str]) -> dict[str, dict[str, Any]]:
    """The three loads (`LOADS`) as `bench.http.run_load` takes them."""
    agents = f"{base}/api/projects/{PROJECT}/agents"
    return {
        "SQL KB search": {
            "method": "POST",
            "url": f"{base}/api/sql/query",
            "bodies": [
                {
                    "query": f"SELECT * FROM {PROJECT}.{KB} WHERE content = '{q}' LIMIT 10",
                    "context": {"db": PROJECT},
                }
                for q in queries
            ],
            "error_pattern": ERROR_ANSWER,
        },
        "list agents": {"method": "GET", "url": agents},
        "streamed completion": {
            "method": "POST",
            "url": f"{agents}/{AGENT}/completions/stream",
            "bodies": [{"messages": [{"question": q, "answer": None}]} for q in questions],
            "ok_pattern": STREAM_ANSWERED,
            "error_pattern": ERROR_ANSWER,
        },
    }


def workload(
    base: str,
    stub: OpenAIStub,
    rows: list[dict[str, Any]],
    queries: list[str],
    questions: list[str],
    embedding_model: dict[str, Any],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The KB and agent on the server at `base`, then each load; its figures by load name."""
    kbs = f"{base}/api/projects/{PROJECT}/knowledge_bases"
    agents = f"{base}/api/projects/{PROJECT}/agents"
    out: dict[str, Any] = {}
    with httpx.Client(timeout=httpx.Timeout(1800, connect=30)) as client:
        drop(client, base)  # leftovers of an earlier run on a long-lived peer
        create_kb(client, kbs, embedding_model)
        insert(client, kbs, rows, args.batch, "insert")
        out["index_settled_s"] = settle(client, base)
        create_agent(client, agents, stub)
        for name, spec in specs(base, queries, questions).items():
            before = _load_average()
            chats = stub.chat_requests
            load = run_load(
                {
                    **spec,
                    "concurrency": args.clients,
                    "duration_s": args.duration,
                    "warmup_s": args.warmup,
                    "max_requests": 10**7,
                    "timeout_s": args.request_timeout,
                }
            )
            out[name] = {
                **summarise(load),
                "stub_chat_requests": stub.chat_requests - chats,
                "load_average_before": before,
                "load_average_after": _load_average(),
            }
            r = out[name]
            print(
                f"    {name}: {r['requests']:,} answered in {r['seconds']} s = {r['rps']} req/s, p50 {r['p50_ms']} "
                f"p95 {r['p95_ms']} p99 {r['p99_ms']} ms, errors {r['errors']} (load average before: {before})",
                flush=True,
            )
    out["answers_after_the_loads"] = answers(base)
    if out["answers_after_the_loads"]:
        with httpx.Client(timeout=AFTER_TIMEOUT_S) as client:
            drop(client, base)
    return out


def answers(base: str) -> bool:
    """Whether the server still lists its agents within `AFTER_TIMEOUT_S` (a peer wedged by the loads does
    not: it is then left as it is, and stopped)."""
    try:
        return httpx.get(f"{base}/api/projects/{PROJECT}/agents", timeout=AFTER_TIMEOUT_S).status_code == 200
    except httpx.HTTPError:
        return False


def _latencies(r: dict[str, Any] | None) -> str:
    if r is None:
        return "not measured"
    return f"{r['p50_ms']} / {r['p95_ms']} / {r['p99_ms']}" if r["requests"] else "none answered"


def table(a: dict[str, Any], p: dict[str, Any] | None, clients: int) -> list[dict[str, Any]]:
    """Per load: requests/s answered without error within the load's duration (the ratio's measure), the
    same to the last answer, latency percentiles and errors, on each server."""
    rows = []
    for name in LOADS:
        mine, theirs = a[name], p[name] if p else None
        advantage: Any = "n/a"
        if theirs is not None:
            advantage = (
                round(mine["rps_in_window"] / theirs["rps_in_window"], 1)
                if theirs["rps_in_window"]
                else "peer: none"
            )
        rows.append(
            {
                "load": f"{name}, {clients} clients",
                "agentkb req/s": mine["rps_in_window"],
                "peer req/s": theirs["rps_in_window"] if theirs else "not measured",
                "agentkb advantage (×, throughput)": advantage,
                "req/s to the last answer (agentkb, peer)": f"{mine['rps']}, {theirs['rps'] if theirs else '-'}",
                "agentkb p50 / p95 / p99 (ms)": _latencies(mine),
                "peer p50 / p95 / p99 (ms)": _latencies(theirs),
                "agentkb errors": f"{mine['errors']} of {mine['requests'] + mine['errors']}",
                "peer errors": f"{theirs['errors']} of {theirs['requests'] + theirs['errors']}"
                if theirs
                else "",
            }
        )
    return rows


def report(
    results: dict[str, Any],
    args: argparse.Namespace,
    rows_in_kb: int,
    peer_name: str | None,
    load_before: str,
    speed_before: dict[str, float],
) -> None:
    a, p = results["agentkb"], results.get("peer")
    rows = table(a, p, args.clients)  # the table's rows
    load_after = _load_average()
    speed_after = machine_speed()
    print_table(
        f"peer: agentkb (serve --workers {args.workers}) vs {peer_name or '(no peer)'}, {args.clients} concurrent "
        f"clients, {args.duration:g} s per load",
        rows,
    )
    print("\n" + machine_line(load_before, load_after, speed_before, speed_after))
    mode = f"{args.clients} concurrent clients"
    write_result(
        "peer",
        {
            "mode": mode,
            "concurrent_clients": args.clients,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "agentkb_workers": args.workers,
            "load_average_before": load_before,
            "load_average_after": load_after,
            **speed_fields(speed_before, speed_after),
            "rows": rows_in_kb,
            "peer": peer_name,
            "peer_measured": bool(p),
            "results": {k: v for k, v in results.items() if k in ("agentkb", "peer")},
            "table": rows,
            "details": [
                {"server": server, "answers after the loads": results[server].get("answers_after_the_loads")}
                for server in ("agentkb", "peer")
                if server in results
            ],
            "note": (
                f"Both servers in one run, the same instant stubs, the same {args.clients} clients (one load "
                f"generator process) on the same {os.cpu_count()} CPUs; agentkb as `agentkb serve --workers "
                f"{args.workers}`, peer: {peer_name or 'none'}. Load average {load_before} before and {load_after} "
                "after the run (the machine is shared: compare the ratios, not the figures); each load's own is in "
                "the result file. Throughput: requests answered without error within the load's duration, over "
                "it; errors: requests that failed (HTTP status, connection, timeout, or an error in the answer), "
                "samples in the result file."
            ),
        },
    )
