"""agentkb against a MindsDB-compatible peer: the same HTTP workload on both, with the same instant stubs,
in one run, and the ratios.

The workload, run against agentkb (`agentkb serve`, fresh data directory) and against the peer: a server
speaking MindsDB's HTTP API given with `--peer-url` (already running), or MindsDB itself started and stopped
by this benchmark with `--mindsdb DIR` (DIR holds `mindsdb-venv/`, a virtualenv with `mindsdb[kb]`, and
`mindsdb-data/config.json`, whose HTTP API listens on `--mindsdb-port`, default 47335):

1. create a knowledge base whose `embedding_model` is the instant stub embedder
   (`{"provider": "openai", "model_name": "stub", "base_url": <stub>/v1, "api_key": "x", "dimensions": 384}`);
2. insert `--rows` generated rows (default 10,000; --quick 2,000; ~500 characters each) in PUTs of
   `--batch` rows (1,000), then insert the same rows again (nothing changed);
3. `--searches` KB searches (200), one at a time, through `POST /api/sql/query`
   `SELECT * FROM mindsdb.<kb> WHERE content = '...' LIMIT 10`, once agentkb's background HNSW index merge
   of the load is done (`bench.peer_setup.settle`, its wait in the details; MindsDB indexes within its
   inserts), so that both are searched indexed, not one while its index builds beside the searches;
4. create an agent over the KB whose model is the scripted stub LLM (`{"provider": "openai",
   "model_name": "stub", "base_url", "api_key"}`; one `kb_query_tool` call, then a fixed answer), and run
   `--completions` streamed completions (20) one at a time: time to the first `data:` line and to `end`.

The stub answers each embedding request from vectors computed before the run for every text the workload
sends (the rows, the searches, the questions; `bench.stubs.precomputed`), so that neither server waits on the
stub's own arithmetic; a text it does not hold is computed then and counted (`stub_vectors_computed` per
phase, in the result file). `--computed-vectors` computes every vector on request instead, as the
benchmark did before 2026-11-28 (its figures are comparable with the earlier rounds').

Both servers talk to the same stubs (one process, a thread of this one), so the stubs must be reachable
from the peer: `--stub-host 0.0.0.0 --stub-public-host <this machine's address>` when the peer runs
elsewhere (in a container: e.g. `host.docker.internal`). Without a peer only agentkb is measured and the
peer column says so. The peer's knowledge base embeds with `{"provider": "openai", "model_name": "stub",
"api_key": "sk-x", "base_url": <stub>/v1}` (MindsDB 26.1 takes no `dimensions`).

The table: insert rows/s, re-insert of unchanged rows rows/s, SQL KB search p50, streamed completion p50
(request to the `end` chunk), each with agentkb's advantage (× faster: the peer's latency over agentkb's,
agentkb's throughput over the peer's). The other measures go to the result file's `details`.

`--clients N` runs, on the same KB and agent, N concurrent clients instead (`bench.peer_clients`: SQL KB
search, streamed completions and list agents, agentkb as `serve --workers 2`; throughput, p50/p95/p99,
errors), its result a mode of its own ("N concurrent clients").

    python -m bench peer [--mindsdb /work/scratch | --peer-url http://127.0.0.1:47334] [--rows 10000]
                         [--quick] [--stub-host H] [--computed-vectors] [--clients 32 [--duration 15]]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from pathlib import Path
from typing import Any

import httpx

from bench.agent import Client, chunk_kinds
from bench.common import TextGenerator, print_table, rate, sql, summary_ms, write_result
from bench.mindsdb import mindsdb_server
from bench.peer_setup import AGENT, KB, PROJECT, create_agent, create_kb, drop, insert, settle
from bench.stubs import bench_stub, kb_tool_then_answer, last_user_text, precomputed
from tests.openai_stub import CHAT_ANSWER, OpenAIStub, Reply

SEED = 41
WARM_UP = 5  # searches before the timed ones, with queries not among them


def chat_script(kb: str) -> Any:
    """The scripted LLM of both servers. agentkb's agent (it offers `kb_query_tool`): one `kb_query_tool`
    call, then the answer (`kb_tool_then_answer`). MindsDB 26.1's agent (pydantic-ai output tools named
    `final_result`: its LLM check, a plan, then an `AgentResponse`): the output tool called with the fields
    its schema asks for, the SQL being `SELECT * FROM <kb> WHERE content = '<question>' LIMIT 5` as a
    final query, so that each run is, on both, two model requests and one KB search."""
    agentkb = kb_tool_then_answer(kb)

    def script(body: dict[str, Any]) -> Reply:
        tools = {t["function"]["name"]: t["function"] for t in body.get("tools") or [] if "function" in t}
        output = next((f for name, f in tools.items() if name.startswith("final_result")), None)
        if output is None:
            return agentkb(body)
        prompt = last_user_text(body)
        question = prompt.rsplit("answer the question:\n", 1)[-1].split("\n\n")[0]
        question = " ".join(question.split()).replace("'", "") or "benchmark"
        values = {
            "text": CHAT_ANSWER,
            "plan": f"Search {kb} for the question.",
            "estimated_steps": 1,
            "sql_query": f"SELECT * FROM {kb} WHERE content = '{question}' LIMIT 5",
            "short_description": "search the knowledge base",
            "type": "final_query",
        }
        fields = (output.get("parameters") or {}).get("properties") or {}
        arguments = {k: values.get(k, 1 if v.get("type") == "integer" else "x") for k, v in fields.items()}
        return Reply(tool_calls=((output["name"], arguments),))

    return script


def _kinds(chunks: list[Any]) -> list[str]:
    """agentkb's chunk kinds (`chunk_kinds`), else a chunk's own `type` (MindsDB 26.1: status, context, data)."""
    return [
        kind if kind != "?" or not isinstance(chunk, dict) else str(chunk.get("type") or "?")
        for kind, chunk in zip(chunk_kinds(chunks), chunks, strict=True)
    ]


def _computed(stub: OpenAIStub) -> int:
    """How many texts the stub has computed a vector for on request (all of them with `--computed-vectors`)."""
    return int(getattr(stub.embed, "misses", stub.texts))


def workload(
    base: str,
    stub: OpenAIStub,
    rows: list[dict[str, Any]],
    batch: int,
    queries: list[str],
    completions: int,
    questions: list[str],
    embedding_model: dict[str, Any],
) -> dict[str, Any]:
    """The workload against one server at `base`; timings and checks."""
    out: dict[str, Any] = {}
    kbs = f"{base}/api/projects/{PROJECT}/knowledge_bases"
    agents = f"{base}/api/projects/{PROJECT}/agents"
    with httpx.Client(timeout=httpx.Timeout(1800, connect=30)) as client:
        drop(client, base)  # leftovers of an earlier run on a long-lived peer

        out["create_kb_ms"] = create_kb(client, kbs, embedding_model)

        embeds, computed = stub.texts, _computed(stub)
        started = time.perf_counter()
        puts = insert(client, kbs, rows, batch, "insert")
        seconds = time.perf_counter() - started
        out["insert"] = {
            "rows": len(rows),
            "seconds": round(seconds, 3),
            "rows_per_s": rate(len(rows), seconds),
            "put": summary_ms(puts),
            "stub_texts_embedded": stub.texts - embeds,
            "stub_vectors_computed": _computed(stub) - computed,
        }
        print(
            f"    inserted {len(rows):,} rows in {seconds:.1f}s ({out['insert']['rows_per_s']} rows/s)",
            flush=True,
        )

        embeds, computed = stub.texts, _computed(stub)
        started = time.perf_counter()
        insert(client, kbs, rows, batch, "re-insert")
        seconds = time.perf_counter() - started
        out["reinsert"] = {
            "rows": len(rows),
            "seconds": round(seconds, 3),
            "rows_per_s": rate(len(rows), seconds),
            "stub_texts_embedded": stub.texts - embeds,
            "stub_vectors_computed": _computed(stub) - computed,
        }
        print(
            f"    re-inserted {len(rows):,} unchanged rows in {seconds:.1f}s "
            f"({out['reinsert']['rows_per_s']} rows/s)",
            flush=True,
        )

        out["index_settled_s"] = settle(client, base)
        warm_up, queries = queries[:WARM_UP], queries[WARM_UP:]
        for q in warm_up:  # queries of their own: a server that caches query vectors gains nothing from them
            sql(client, base, f"SELECT * FROM {PROJECT}.{KB} WHERE content = '{q}' LIMIT 10")
        latencies: list[float] = []
        empty, computed = 0, _computed(stub)
        started = time.perf_counter()
        for q in queries:
            t = time.perf_counter()
            answer = sql(client, base, f"SELECT * FROM {PROJECT}.{KB} WHERE content = '{q}' LIMIT 10")
            latencies.append(time.perf_counter() - t)
            empty += not answer.get("data")
        seconds = time.perf_counter() - started
        out["search"] = {
            **summary_ms(latencies),
            "queries": len(queries),
            "qps": rate(len(queries), seconds),
            "empty_answers": empty,
            "stub_vectors_computed": _computed(stub) - computed,
        }
        print(f"    {len(queries)} SQL KB searches: p50 {out['search']['p50_ms']} ms", flush=True)

        create_agent(client, agents, stub)
        streamer = Client(base)
        try:
            body = {"messages": [{"question": questions[0], "answer": None}]}
            streamer.stream(f"/api/projects/{PROJECT}/agents/{AGENT}/completions/stream", body)  # warm-up
            first, end, outputs = [], [], 0
            sequences: dict[str, int] = {}
            chats, computed = stub.chat_requests, _computed(stub)
            for i in range(completions):
                body = {"messages": [{"question": questions[(i + 1) % len(questions)], "answer": None}]}
                t = streamer.stream(f"/api/projects/{PROJECT}/agents/{AGENT}/completions/stream", body)
                if t["first_data_s"] is not None:
                    first.append(t["first_data_s"])
                if t["end_s"] is not None:
                    end.append(t["end_s"])
                kinds = _kinds(t["chunks"])
                outputs += "output" in kinds or "data" in kinds  # an answer: agentkb's output, MindsDB's data
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
            "stub_vectors_computed": _computed(stub) - computed,
        }
        print(
            f"    {completions} streamed completions: start p50 {out['stream']['start']['p50_ms']} ms, "
            f"end p50 {out['stream']['end']['p50_ms']} ms, sequences {sequences}",
            flush=True,
        )

        drop(client, base)
    return out


def peer_embedding_model(stub: OpenAIStub) -> dict[str, Any]:
    """The stub embedder as MindsDB 26.1 takes it (no `dimensions`)."""
    return {"provider": "openai", "model_name": "stub", "api_key": "sk-x", "base_url": stub.url}


def ratio_table(
    a: dict[str, Any], p: dict[str, Any] | None, n: int, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """The four headline measures, with agentkb's advantage (× faster) where the peer was measured."""
    measures = [
        (f"insert {n:,} rows, PUTs of {args.batch:,} (rows/s)", lambda r: r["insert"]["rows_per_s"], True),
        (f"re-insert the {n:,} unchanged rows (rows/s)", lambda r: r["reinsert"]["rows_per_s"], True),
        (f"SQL KB search p50 (ms), {args.searches} sequential", lambda r: r["search"]["p50_ms"], False),
        (
            f"streamed completion p50 (ms, request to end chunk), {args.completions} runs",
            lambda r: r["stream"]["end"]["p50_ms"],
            False,
        ),
    ]
    table = []
    for label, get, higher_is_better in measures:
        mine, theirs = get(a), get(p) if p else None
        advantage: Any = "n/a"
        if mine and theirs:
            advantage = round(mine / theirs if higher_is_better else theirs / mine, 2)
        table.append(
            {
                "measure": label,
                "agentkb": mine,
                "peer": theirs if p else "not measured",
                "agentkb advantage (×)": advantage,
            }
        )
    return table


def detail_table(
    a: dict[str, Any], p: dict[str, Any] | None, args: argparse.Namespace
) -> list[dict[str, Any]]:
    metrics = [
        ("create KB (ms)", lambda r: r["create_kb_ms"]),
        ("insert: one PUT p50 (ms)", lambda r: r["insert"]["put"]["p50_ms"]),
        ("insert: texts embedded", lambda r: r["insert"]["stub_texts_embedded"]),
        ("re-insert: texts embedded", lambda r: r["reinsert"]["stub_texts_embedded"]),
        (
            "vectors the stub computed on request (insert, re-insert, search, stream)",
            lambda r: ", ".join(
                str(r[phase].get("stub_vectors_computed"))
                for phase in ("insert", "reinsert", "search", "stream")
            ),
        ),
        (
            "index merges done before the searches, after (s)",
            lambda r: "none to wait for" if r.get("index_settled_s") is None else r["index_settled_s"],
        ),
        ("SQL KB search p95 (ms)", lambda r: r["search"]["p95_ms"]),
        ("SQL KB search (queries/s)", lambda r: r["search"]["qps"]),
        ("stream: first data: line p50 (ms)", lambda r: r["stream"]["start"]["p50_ms"]),
        ("stream: end chunk p95 (ms)", lambda r: r["stream"]["end"]["p95_ms"]),
        ("stream: runs with an answer", lambda r: r["stream"]["with_output"]),
        ("stream: chunk sequences", lambda r: r["stream"]["chunk_sequences"]),
    ]
    return [
        {"measure": label, "agentkb": get(a), "peer": get(p) if p else "not measured"}
        for label, get in metrics
    ]


def main(argv: list[str]) -> None:
    from bench import peer_clients as concurrent
    from bench.ingest import make_rows
    from bench.search import make_queries
    from bench.server import agentkb_server, cpu_delta, cpu_seconds

    parser = argparse.ArgumentParser(prog="python -m bench peer", description=__doc__.split("\n\n")[0])
    peer = parser.add_mutually_exclusive_group()
    peer.add_argument("--peer-url", help="base URL of a running MindsDB-compatible server")
    peer.add_argument(
        "--mindsdb",
        type=Path,
        help="start (and at the end stop) MindsDB from this folder (mindsdb-venv/, mindsdb-data/config.json)",
    )
    parser.add_argument("--mindsdb-port", type=int, default=47335, help="the HTTP port in its config.json")
    parser.add_argument("--rows", type=int, help="rows to insert (default 10,000; --quick 2,000)")
    parser.add_argument("--batch", type=int, default=1000, help="rows per PUT")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--completions", type=int, default=20)
    parser.add_argument("--stub-host", default="127.0.0.1", help="address the stubs listen on")
    parser.add_argument(
        "--stub-public-host", help="host name the servers reach the stubs at (default: --stub-host)"
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--clients",
        type=int,
        help="concurrent clients: the three loads of bench.peer_clients instead (e.g. 32)",
    )
    parser.add_argument("--duration", type=float, default=15.0, help="--clients: seconds per load")
    parser.add_argument("--warmup", type=float, default=3.0, help="--clients: warm-up seconds per load")
    parser.add_argument("--workers", type=int, default=2, help="--clients: `agentkb serve --workers`")
    parser.add_argument("--request-timeout", type=float, default=60.0, help="--clients: seconds per request")
    parser.add_argument(
        "--computed-vectors",
        action="store_true",
        help="the stub computes each text's vector on request (as before 2026-11-28) instead of looking up "
        "vectors computed before the run",
    )
    args = parser.parse_args(argv)
    n = args.rows or (2000 if args.quick else 10_000)
    load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())

    texts = TextGenerator(seed=SEED).texts(n)
    rows = make_rows(texts)
    queries = [q.replace("'", "") for q in make_queries(texts, WARM_UP + args.searches, seed=SEED + 1)]
    questions = [q.replace("'", "") for q in make_queries(texts, args.completions + 1, seed=SEED + 2)]
    peer_name = args.peer_url or (f"MindsDB from {args.mindsdb}" if args.mindsdb else None)
    print(
        f"peer: {n:,} rows in PUTs of {args.batch:,} (twice), {args.searches} SQL KB searches, "
        f"{args.completions} streamed completions; peer {peer_name or 'not given'}",
        flush=True,
    )

    results: dict[str, Any] = {}
    work = (rows, args.batch, queries, args.completions, questions)
    embed = None if args.computed_vectors else precomputed([*(r["body"] for r in rows), *queries, *questions])
    with bench_stub(
        embed,
        chat_script=chat_script(f"{PROJECT}.{KB}"),
        bind=args.stub_host,
        public_host=args.stub_public_host,
    ) as stub:
        print(f"  stubs at {stub.url}", flush=True)

        def measure(base: str, embedding_model: dict[str, Any]) -> dict[str, Any]:
            if args.clients:
                return concurrent.workload(base, stub, rows, queries, questions, embedding_model, args)
            return workload(base, stub, *work, embedding_model)

        print("  agentkb:", flush=True)
        with agentkb_server(args=["--workers", str(args.workers)] if args.clients else None) as base:
            cpu = cpu_seconds(base)
            results["agentkb"] = measure(base, stub.embedding_model())
            if not args.clients:  # cpu_seconds counts the main process, not `--workers`' others
                results["agentkb"]["server_cpu_s"] = cpu_delta(cpu, cpu_seconds(base))
        server = (
            mindsdb_server(args.mindsdb, args.mindsdb_port)
            if args.mindsdb
            else contextlib.nullcontext(args.peer_url.rstrip("/") if args.peer_url else None)
        )
        with server as peer_base:
            if peer_base:
                print(f"  peer {peer_base}:", flush=True)
                status = httpx.get(f"{peer_base}/api/status", timeout=30)
                results["peer"] = measure(peer_base, peer_embedding_model(stub))
                results["peer"]["status"] = status.json() if status.status_code == 200 else status.status_code

    if args.clients:
        concurrent.report(results, args, n, peer_name, load_before)
        return
    a, p = results["agentkb"], results.get("peer")
    table = ratio_table(a, p, n, args)
    details = detail_table(a, p, args)
    load_after = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print_table(f"peer: agentkb vs {peer_name or '(no peer)'}, same workload, same instant stubs", table)
    print_table("details", details)
    print(
        f"\nmachine: {os.cpu_count()} CPUs (load average before the run: {load_before}; after: {load_after})"
    )
    if not p:
        print(
            "\nthe peer was not measured: agentkb only. Pass --mindsdb DIR (MindsDB installed there) or "
            "--peer-url (a running MindsDB-compatible server) to compare."
        )
    vectors = "computed on request" if args.computed_vectors else "precomputed"
    write_result(
        "peer",
        {
            "quick": args.quick,
            "load_average_before": load_before,
            "load_average_after": load_after,
            "rows": n,
            "batch": args.batch,
            "searches": args.searches,
            "completions": args.completions,
            "stub_vectors": vectors,
            "peer": peer_name,
            "peer_measured": bool(p),
            "results": results,
            "table": table,
            "details": details,
            "note": (
                f"Both servers in one run, the same instant stubs (vectors {vectors}); peer: "
                f"{peer_name or 'none'}. Load average "
                f"{load_before} before and {load_after} after the run (the machine is shared: compare the "
                "ratios, not the figures). agentkb advantage: the peer's latency over agentkb's, agentkb's "
                "throughput over the peer's."
            ),
        },
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
