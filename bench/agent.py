"""Agent completion latency with an instant scripted LLM: what agentkb itself adds to an agent run.

One agent over a small KB, both on the instant stub (`bench_stub()`, bench/stubs.py): the KB embeds with
`HashedBow` and the agent's model is `{"provider": "openai", "base_url": <stub>}`, whose chat route is
scripted (`kb_tool_then_answer`): the first model request gets one `kb_query_tool` call,
`SELECT * FROM mindsdb.<kb> WHERE content = '<question>' LIMIT 5`, the second (which carries the tool
result) a fixed final answer. So each run is: model request, KB search (one stub embedding + one hybrid
query), model request, answer, trace stored.

Measured from one client, one request at a time over a kept-alive `http.client` connection:
- `POST .../agents/{a}/completions`: latency end to end (send → whole body), `--requests` of them
  (default 200; --quick 50). Target: p50 ≤ 30 ms.
- `POST .../completions/stream`: time from sending the request to the arrival of the first `data:`
  line (the `start` chunk; target p50 ≤ 10 ms), to the `output` chunk and to the `end` chunk.
The runs' traces give the time inside the run (`duration_ms`) and in the KB tool, to split the total.

    python -m bench agent [--requests 200] [--rows 48] [--quick] [--profile]
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import statistics
import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from bench.common import CACHE, TextGenerator, check, print_table, summary_ms, write_result

PROJECT = "mindsdb"
KB = "bench_agent_kb"
AGENT = "bench_agent"
SEED = 31
WARMUP = 10
PLAIN_P50_TARGET_MS = 30.0
START_P50_TARGET_MS = 10.0


class Client:
    """One kept-alive `http.client` connection to a base URL; JSON in, timings out."""

    def __init__(self, base: str, timeout: float = 120.0) -> None:
        parts = urlsplit(base)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def close(self) -> None:
        self.conn.close()

    def _send(self, path: str, body: Any, method: str = "POST") -> http.client.HTTPResponse:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "*/*"}
        try:
            self.conn.request(method, self.prefix + path, body=data, headers=headers)
            return self.conn.getresponse()
        except (ConnectionError, http.client.HTTPException):  # a dropped keep-alive connection: once more
            self.conn.close()
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self.conn.request(method, self.prefix + path, body=data, headers=headers)
            return self.conn.getresponse()

    def request(self, method: str, path: str, body: Any = None) -> tuple[float, Any]:
        """(seconds from send to the whole body, the JSON body); raises on a non-2xx answer."""
        started = time.perf_counter()
        response = self._send(path, body, method)
        raw = response.read()
        elapsed = time.perf_counter() - started
        if response.status >= 300:
            raise RuntimeError(f"{method} {path} -> {response.status}: {raw[:500]!r}")
        return elapsed, json.loads(raw) if raw else None

    def post(self, path: str, body: Any) -> tuple[float, Any]:
        return self.request("POST", path, body)

    def get(self, path: str) -> Any:
        """GET `path`: the JSON body. Also what keeps the connection open (or opens it again) before timed
        requests, so none of them pays for a reconnect."""
        return self.request("GET", path)[1]

    def stream(self, path: str, body: Any) -> dict[str, Any]:
        """POST and read server-sent events as they come: seconds to the response headers, to the first
        `data:` line, to the first `output` chunk and to the `end` chunk (None when a chunk never came),
        and the chunks."""
        started = time.perf_counter()
        response = self._send(path, body)
        timings: dict[str, Any] = {
            "headers_s": time.perf_counter() - started,
            "first_data_s": None,
            "output_s": None,
            "end_s": None,
        }
        if response.status >= 300:
            raise RuntimeError(f"POST {path} -> {response.status}: {response.read()[:500]!r}")
        chunks: list[Any] = []
        while True:
            line = response.readline()
            if not line:
                break
            if not line.startswith(b"data:"):
                continue
            now = time.perf_counter() - started
            if timings["first_data_s"] is None:
                timings["first_data_s"] = now
            payload = line[5:].strip()
            try:
                chunk = json.loads(payload)
            except ValueError:
                chunk = payload.decode(errors="replace")
            chunks.append(chunk)
            if isinstance(chunk, dict):
                if "output" in chunk and timings["output_s"] is None:
                    timings["output_s"] = now
                if chunk.get("type") == "end":
                    timings["end_s"] = now
                    break
        response.read()  # the rest (the chunked-encoding terminator), so the connection can be reused
        timings["chunks"] = chunks
        return timings


def chunk_kinds(chunks: list[Any]) -> list[str]:
    """start / action / step / output / error / end / ? per chunk."""
    kinds = []
    for chunk in chunks:
        if not isinstance(chunk, dict):
            kinds.append("?")
        elif chunk.get("type") in ("start", "end", "error"):
            kinds.append(chunk["type"])
        elif "actions" in chunk:
            kinds.append("action")
        elif "steps" in chunk:
            kinds.append("step")
        elif "output" in chunk:
            kinds.append("output")
        else:
            kinds.append("?")
    return kinds


def questions(n: int, seed: int = SEED) -> list[str]:
    generator = TextGenerator(seed=seed + 1)
    return [" ".join(generator.draw(6)) + "?" for _ in range(n)]


def messages(question: str) -> dict[str, Any]:
    return {"messages": [{"question": question, "answer": None}]}


def main(argv: list[str]) -> None:
    from bench.ingest import create_kb, make_rows
    from bench.server import agentkb_server, cpu_delta, cpu_seconds, py_spy, top_frames
    from bench.stubs import bench_stub, kb_tool_then_answer
    from tests.openai_stub import CHAT_ANSWER

    parser = argparse.ArgumentParser(prog="python -m bench agent", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--requests", type=int, help="sequential requests per endpoint (default 200; --quick 50)"
    )
    parser.add_argument("--rows", type=int, default=48, help="rows in the agent's KB")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--profile", action="store_true", help="py-spy the server during the plain completions"
    )
    args = parser.parse_args(argv)
    n = args.requests or (50 if args.quick else 200)
    asked = questions(max(n, 50))
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    profile = CACHE / "profiles" / f"agent-plain-{stamp}.txt" if args.profile else None
    load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())

    print(
        f"agent: scripted OpenAI-compatible stub (1 kb_query_tool call, then the answer), KB of {args.rows} rows "
        f"(stub embedder), {n} sequential requests per endpoint",
        flush=True,
    )
    results: dict[str, Any] = {}
    with (
        bench_stub(chat_script=kb_tool_then_answer(f"{PROJECT}.{KB}")) as stub,
        agentkb_server() as base,
        httpx.Client(timeout=60) as setup,
    ):
        create_kb(setup, base.kbs, KB, stub.embedding_model())
        check(
            setup.put(
                f"{base.kbs}/{KB}",
                json={"knowledge_base": {"rows": make_rows(TextGenerator(seed=SEED).texts(args.rows))}},
            )
        )
        agents = f"/api/projects/{PROJECT}/agents"
        check(
            setup.post(
                f"{base}{agents}",
                json={
                    "agent": {
                        "name": AGENT,
                        "model": stub.chat_model(),
                        "data": {"knowledge_bases": [f"{PROJECT}.{KB}"], "tables": []},
                    }
                },
            )
        )
        plain_path, stream_path = f"{agents}/{AGENT}/completions", f"{agents}/{AGENT}/completions/stream"

        # the stub's own round trip, from this process
        stub_lat = []
        for q in asked[:50]:
            started = time.perf_counter()
            check(
                setup.post(
                    f"{stub.url}/chat/completions",
                    json={"model": "stub", "messages": [{"role": "user", "content": q}]},
                )
            )
            stub_lat.append(time.perf_counter() - started)
        results["stub_chat_round_trip"] = summary_ms(stub_lat)

        client = Client(base)
        try:
            # probe: the run is what we think it is
            chats = stub.chat_requests
            _, answer = client.post(plain_path, messages(asked[0]))
            if answer["message"]["content"] != CHAT_ANSWER or stub.chat_requests - chats != 2:
                raise RuntimeError(f"unexpected run: {answer} ({stub.chat_requests - chats} chat requests)")
            trace = check(setup.get(f"{base}{agents}/{AGENT}/traces/{answer['message']['trace_id']}")).json()
            steps = [s["tool"] for s in trace["steps"]]
            if steps != ["kb_query_tool"] or "Result in CSV format" not in trace["steps"][0]["observation"]:
                raise RuntimeError(f"unexpected trace: {json.dumps(trace)[:1000]}")
            probe = client.stream(stream_path, messages(asked[1]))
            kinds = chunk_kinds(probe["chunks"])
            if kinds != ["start", "action", "step", "output", "end"]:
                raise RuntimeError(f"unexpected stream chunks {kinds}: {json.dumps(probe['chunks'])[:1000]}")
            print(
                f"  probe ok: trace steps {steps}, stream chunks {kinds}, "
                f"sources {len(answer['message']['sources'])}",
                flush=True,
            )

            for q in asked[:WARMUP]:
                client.post(plain_path, messages(q))
                client.stream(stream_path, messages(q))

            # plain completions
            latencies, trace_ids = [], []
            cpu = cpu_seconds(base)
            with py_spy(base.pid, profile):
                for i in range(n):
                    elapsed, answer = client.post(plain_path, messages(asked[i % len(asked)]))
                    latencies.append(elapsed)
                    trace_ids.append(answer["message"]["trace_id"])
            used = cpu_delta(cpu, cpu_seconds(base))
            runs, tools = [], []
            for tid in trace_ids:
                trace = check(setup.get(f"{base}{agents}/{AGENT}/traces/{tid}")).json()
                runs.append(trace["duration_ms"] / 1000)
                tools.append(sum(s["duration_ms"] or 0 for s in trace["steps"]) / 1000)
            results["plain"] = {
                **summary_ms(latencies),
                "requests": n,
                "server_cpu_ms_per_request": {k: round(1000 * v / n, 3) for k, v in used.items()},
                "trace_run": summary_ms(runs),
                "trace_kb_tool": summary_ms(tools),
                "target_p50_ms": PLAIN_P50_TARGET_MS,
            }
            r = results["plain"]
            print(
                f"  plain: p50 {r['p50_ms']} ms, p95 {r['p95_ms']} ms (run inside the server p50 "
                f"{r['trace_run']['p50_ms']} ms, KB tool p50 {r['trace_kb_tool']['p50_ms']} ms)",
                flush=True,
            )

            # streamed completions
            timings: dict[str, list[float]] = {
                "headers_s": [],
                "first_data_s": [],
                "output_s": [],
                "end_s": [],
            }
            bad = 0
            cpu = cpu_seconds(base)
            for i in range(n):
                t = client.stream(stream_path, messages(asked[i % len(asked)]))
                if chunk_kinds(t["chunks"]) != ["start", "action", "step", "output", "end"]:
                    bad += 1
                for key, values in timings.items():
                    if t[key] is not None:
                        values.append(t[key])
            used = cpu_delta(cpu, cpu_seconds(base))
            results["stream"] = {
                **{key[:-2]: summary_ms(values) for key, values in timings.items()},
                "requests": n,
                "unexpected_chunk_sequences": bad,
                "server_cpu_ms_per_request": {k: round(1000 * v / n, 3) for k, v in used.items()},
                "target_start_p50_ms": START_P50_TARGET_MS,
            }
            s = results["stream"]
            print(
                f"  stream: start p50 {s['first_data']['p50_ms']} ms, end p50 {s['end']['p50_ms']} ms",
                flush=True,
            )
        finally:
            client.close()

    plain, stream = results["plain"], results["stream"]
    cpu_plain = plain["server_cpu_ms_per_request"]
    cpu_stream = stream["server_cpu_ms_per_request"]
    table = [
        {
            "measure": "plain completion, end to end",
            "p50_ms": plain["p50_ms"],
            "p95_ms": plain["p95_ms"],
            "p99_ms": plain["p99_ms"],
            "target": f"p50 ≤ {PLAIN_P50_TARGET_MS:g} ms",
            "met": "yes" if plain["p50_ms"] <= PLAIN_P50_TARGET_MS else "NO",
            "server cpu ms/req (python + pg)": f"{cpu_plain['server_python_cpu_s']} + {cpu_plain['postgres_cpu_s']}",
        },
        {
            "measure": "  of which the run (trace duration_ms)",
            "p50_ms": plain["trace_run"]["p50_ms"],
            "p95_ms": plain["trace_run"]["p95_ms"],
            "p99_ms": plain["trace_run"]["p99_ms"],
        },
        {
            "measure": "  of which the kb_query_tool step",
            "p50_ms": plain["trace_kb_tool"]["p50_ms"],
            "p95_ms": plain["trace_kb_tool"]["p95_ms"],
            "p99_ms": plain["trace_kb_tool"]["p99_ms"],
        },
        {"measure": "stream: response headers", **_cols(stream["headers"])},
        {
            "measure": "stream: first data: line (start chunk)",
            **_cols(stream["first_data"]),
            "target": f"p50 ≤ {START_P50_TARGET_MS:g} ms",
            "met": "yes" if stream["first_data"]["p50_ms"] <= START_P50_TARGET_MS else "NO",
            "server cpu ms/req (python + pg)": f"{cpu_stream['server_python_cpu_s']} + {cpu_stream['postgres_cpu_s']}",
        },
        {"measure": "stream: output chunk", **_cols(stream["output"])},
        {"measure": "stream: end chunk", **_cols(stream["end"])},
        {
            "measure": "stub chat round trip (from the bench process)",
            **_cols(results["stub_chat_round_trip"]),
        },
    ]
    print_table(
        f"agent: {n} sequential requests per endpoint, scripted stub LLM (2 model calls, 1 KB search)", table
    )
    print(
        f"\nmachine: {os.cpu_count()} CPUs (load average before the run: {load_before}); the stubs run in this "
        "process, the server in its own"
    )
    if profile is not None and profile.exists():
        print(
            f"\npy-spy of the server (plain completions), {profile}\n  % of samples in stack, % innermost, frame:"
        )
        for frame, inclusive, own in top_frames(profile, 40, interesting=True):
            print(f"  {inclusive:5.1f} {own:5.1f}  {frame}")
    write_result(
        "agent",
        {
            "quick": args.quick,
            "load_average_before": load_before,
            "requests": n,
            "kb_rows": args.rows,
            "results": results,
            "table": table,
            "profile": str(profile) if profile else None,
            "mean_plain_ms": round(statistics.fmean(latencies) * 1000, 3),
        },
    )


def _cols(summary: dict[str, float]) -> dict[str, float]:
    return {"p50_ms": summary["p50_ms"], "p95_ms": summary["p95_ms"], "p99_ms": summary["p99_ms"]}


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
