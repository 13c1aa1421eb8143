"""agentkb against a MindsDB-compatible peer: the same HTTP workload on both, with the same instant stubs,
in one run, and the ratios.

The workload, run against agentkb (`agentkb serve`, fresh data directory) and against the peer: a server
speaking MindsDB's HTTP API given with `--peer-url` (already running), or MindsDB itself started and stopped
by this benchmark with `--mindsdb DIR` (DIR holds `mindsdb-venv/`, a virtualenv with `mindsdb[kb]`, and
`mindsdb-data/config.json`, whose HTTP API listens on `--mindsdb-port`, default 47335). Both servers are up
together; the load phases (1–2) run on one after the other, the searches (3) and completions (4) interleaved
(in blocks: 50 searches, 5 completions), so that both are timed under the same load of this shared
machine (`bench.peer_phases`):

1. create a knowledge base whose `embedding_model` is the instant stub embedder
   (`{"provider": "openai", "model_name": "stub", "base_url": <stub>/v1, "api_key": "x", "dimensions": 384}`);
2. insert `--rows` generated rows (default 10,000; --quick 2,000; ~500 characters each) in PUTs of
   `--batch` rows (1,000), then insert the same rows again (nothing changed);
3. `--searches` KB searches (200) through each of two clients, one at a time, through `POST /api/sql/query`
   `SELECT * FROM mindsdb.<kb> WHERE content = '...' LIMIT 10`, once agentkb's background HNSW index merge
   of the load is done (`bench.peer_setup.settle`, its wait in the details; MindsDB indexes within its
   inserts), so that both are searched indexed, not one while its index builds beside the searches. The
   ratio is taken through the standard library's `http.client` (`bench.agent.Client`: the client's own CPU is
   in every latency, the same on both servers); the figures through httpx, the client this benchmark used
   before 2026-11-29, and each client's CPU per search are in the details;
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
from pathlib import Path
from typing import Any

import httpx

from bench.common import TextGenerator, machine_line, machine_speed, print_table, speed_fields, write_result
from bench.mindsdb import mindsdb_server
from bench.peer_phases import STREAM_BLOCK, WARM_UP, Side, workload
from bench.peer_setup import KB, PROJECT
from bench.stubs import bench_stub, kb_tool_then_answer, last_user_text, precomputed
from tests.openai_stub import CHAT_ANSWER, OpenAIStub, Reply

SEED = 41


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


def peer_server(args: argparse.Namespace) -> contextlib.AbstractContextManager[str | None]:
    """MindsDB started from `--mindsdb`, else the running server of `--peer-url`, else None (no peer)."""
    if args.mindsdb:
        return mindsdb_server(args.mindsdb, args.mindsdb_port)
    return contextlib.nullcontext(args.peer_url.rstrip("/") if args.peer_url else None)


def peer_status(base: str) -> Any:
    """The peer's `/api/status` answer (its version), else its HTTP status code."""
    status = httpx.get(f"{base}/api/status", timeout=30)
    return status.json() if status.status_code == 200 else status.status_code


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
        (
            f"SQL KB search p50 (ms), {args.searches} sequential, http.client",
            lambda r: r["search"]["p50_ms"],
            False,
        ),
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


def _p50_p95(search: dict[str, Any] | None) -> str:
    return "not measured" if not search else f"{search['p50_ms']}, {search['p95_ms']}"


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
        ("SQL KB search p95 (ms), http.client", lambda r: r["search"]["p95_ms"]),
        ("SQL KB search p50, p95 (ms), httpx", lambda r: _p50_p95(r.get("search_httpx"))),
        (
            "the client's CPU per search (ms), http.client, httpx",
            lambda r: ", ".join(str(r.get(k, {}).get("client_cpu_ms")) for k in ("search", "search_httpx")),
        ),
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
    speed_before = machine_speed()

    texts = TextGenerator(seed=SEED).texts(n)
    rows = make_rows(texts)
    queries = [q.replace("'", "") for q in make_queries(texts, WARM_UP + 2 * args.searches, seed=SEED + 1)]
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

        if args.clients:  # each server alone, one after the other
            with agentkb_server(args=["--workers", str(args.workers)]) as base:
                print("  agentkb:", flush=True)
                results["agentkb"] = concurrent.workload(
                    base, stub, rows, queries, questions, stub.embedding_model(), args
                )
            with peer_server(args) as peer_base:
                if peer_base:
                    print(f"  peer {peer_base}:", flush=True)
                    status = peer_status(peer_base)
                    results["peer"] = concurrent.workload(
                        peer_base, stub, rows, queries, questions, peer_embedding_model(stub), args
                    )
                    results["peer"]["status"] = status
        else:  # both servers up at once, their searches and completions interleaved (bench.peer_phases)
            with agentkb_server() as base, peer_server(args) as peer_base:
                sides = [Side("agentkb", base, stub.embedding_model())]
                if peer_base:
                    print(f"  agentkb {base}, peer {peer_base}", flush=True)
                    status = peer_status(peer_base)
                    sides.append(Side("peer", peer_base, peer_embedding_model(stub)))
                cpu = cpu_seconds(base)
                try:
                    workload(sides, stub, *work)
                finally:
                    for side in sides:
                        side.close()
                results["agentkb"] = sides[0].out
                results["agentkb"]["server_cpu_s"] = cpu_delta(cpu, cpu_seconds(base))
                if peer_base:
                    results["peer"] = sides[1].out
                    results["peer"]["status"] = status

    if args.clients:
        concurrent.report(results, args, n, peer_name, load_before, speed_before)
        return
    a, p = results["agentkb"], results.get("peer")
    table = ratio_table(a, p, n, args)
    details = detail_table(a, p, args)
    load_after = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    speed_after = machine_speed()
    print_table(f"peer: agentkb vs {peer_name or '(no peer)'}, same workload, same instant stubs", table)
    print_table("details", details)
    print("\n" + machine_line(load_before, load_after, speed_before, speed_after))
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
            **speed_fields(speed_before, speed_after),
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
                f"Both servers up in one run, the same instant stubs (vectors {vectors}); peer: "
                f"{peer_name or 'none'}. Loads one server after the other; searches interleaved in blocks of "
                f"{a['search']['block']}, through http.client (the ratio) and httpx by turns of two blocks, completions "
                f"of {STREAM_BLOCK}. Load average "
                f"{load_before} before and {load_after} after the run (the machine is shared: compare the "
                "ratios, not the figures). agentkb advantage: the peer's latency over agentkb's, agentkb's "
                "throughput over the peer's."
            ),
        },
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
