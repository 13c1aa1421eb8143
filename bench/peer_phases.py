"""The single-client workload of `python -m bench peer`, phase by phase, on one server or on two at once.

Each server is a `Side`. Its load (create the KB, insert, re-insert, wait for agentkb's index merges) runs on
one side after the other: each phase is seconds long and times one side alone. The searches and the streamed
completions, milliseconds each, run interleaved when two sides are given: `SEARCH_BLOCK` searches on one
server, the same on the other, and so on (agentkb first in even blocks, the peer in odd ones), the completions
`STREAM_BLOCK` at a time, so that both are timed under the same load of this shared machine, whose speed
drifts within minutes by more than the difference asked of them (a CPU-bound Python loop took 152 ms, then
83 ms, seconds apart). Blocks rather than single searches keep each server's searches back to back, as one
client's are: agentkb's searches ran 20% slower with a 1.3 s pause after every 20 (its caches and
PostgreSQL's gone cold), so the blocks are few. Both servers stay up throughout; an idle MindsDB 26.1 used
0.35% of a CPU here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx

from bench.agent import Client, chunk_kinds
from bench.common import rate, sql, sql_answer, sql_body, summary_ms
from bench.peer_setup import AGENT, KB, PROJECT, create_agent, create_kb, drop, insert, settle
from tests.openai_stub import OpenAIStub

WARM_UP = 5  # searches before the timed ones, with queries not among them
SEARCH_BLOCK = 50
STREAM_BLOCK = 5  # completions
# the clients the searches are timed through, in turn by two blocks: the standard library's `http.client`
# (`bench.agent.Client`, one kept-alive connection), the figure the ratio is taken from, and httpx. A
# client's own CPU is in every latency it measures, the same on either server, so that the faster the server
# the more of the figure is the client's: timed in this benchmark's thread, httpx spent 0.73 ms per agentkb
# search and http.client 0.29 ms (AMD EPYC 25/17, 2 vCPUs), where agentkb's search took ~3 ms
CLIENTS = ("stdlib", "httpx")
CLIENT_NAMES = {"stdlib": "http.client", "httpx": "httpx"}


@dataclass
class Side:
    """One server under the workload: its name ("agentkb", "peer"), base URL, the stub embedder as it takes
    it, its two HTTP clients (httpx; `stdlib`, one kept-alive `http.client` connection, for the timed searches
    and the streamed completions), and its results."""

    name: str
    base: str
    embedding_model: dict[str, Any]
    client: httpx.Client = field(
        default_factory=lambda: httpx.Client(timeout=httpx.Timeout(1800, connect=30))
    )
    out: dict[str, Any] = field(default_factory=dict)
    stdlib: Client = field(init=False)

    def __post_init__(self) -> None:
        self.stdlib = Client(self.base)  # connects on its first request

    @property
    def kbs(self) -> str:
        return f"{self.base}/api/projects/{PROJECT}/knowledge_bases"

    @property
    def agents(self) -> str:
        return f"{self.base}/api/projects/{PROJECT}/agents"

    def ready(self, client: str) -> None:
        """One untimed status request through `client`. A server closes a connection left idle past its
        keep-alive (uvicorn: 5 s), and httpx drops its own after 5 s: a block that starts after the other
        client's turn would otherwise time a reconnect in its first search."""
        if client == "httpx":
            self.client.get(f"{self.base}/api/status").raise_for_status()
        else:
            self.stdlib.get("/api/status")

    def sql(self, client: str, query: str) -> dict[str, Any]:
        """`query` through `POST /api/sql/query` by `client` ("stdlib" or "httpx"): the answer; raises on an HTTP
        error or an `error` answer."""
        if client == "httpx":
            return sql(self.client, self.base, query)
        return sql_answer(query, self.stdlib.post("/api/sql/query", sql_body(query))[1])

    def close(self) -> None:
        self.client.close()
        self.stdlib.close()


def computed(stub: OpenAIStub) -> int:
    """How many texts the stub has computed a vector for on request (all of them with `--computed-vectors`)."""
    return int(getattr(stub.embed, "misses", stub.texts))


def kinds(chunks: list[Any]) -> list[str]:
    """agentkb's chunk kinds (`chunk_kinds`), else a chunk's own `type` (MindsDB 26.1: status, context, data)."""
    return [
        kind if kind != "?" or not isinstance(chunk, dict) else str(chunk.get("type") or "?")
        for kind, chunk in zip(chunk_kinds(chunks), chunks, strict=True)
    ]


def load(side: Side, stub: OpenAIStub, rows: list[dict[str, Any]], batch: int) -> None:
    """Create the KB, insert the rows, insert them again unchanged, and wait for agentkb's index merges."""
    drop(side.client, side.base)  # leftovers of an earlier run on a long-lived peer
    side.out["create_kb_ms"] = create_kb(side.client, side.kbs, side.embedding_model)
    for phase, what in (("insert", "insert"), ("reinsert", "re-insert")):
        embeds, vectors = stub.texts, computed(stub)
        started = time.perf_counter()
        puts = insert(side.client, side.kbs, rows, batch, what)
        seconds = time.perf_counter() - started
        side.out[phase] = {
            "rows": len(rows),
            "seconds": round(seconds, 3),
            "rows_per_s": rate(len(rows), seconds),
            "stub_texts_embedded": stub.texts - embeds,
            "stub_vectors_computed": computed(stub) - vectors,
        }
        if phase == "insert":
            side.out[phase]["put"] = summary_ms(puts)
        print(
            f"    {side.name}: {what} of {len(rows):,} rows in {seconds:.1f}s "
            f"({side.out[phase]['rows_per_s']} rows/s)",
            flush=True,
        )
    side.out["index_settled_s"] = settle(side.client, side.base)


def interleaved(sides: list[Side], items: list[Any], block: int = 1) -> Iterator[tuple[Side, Any]]:
    """(side, item) for each item on every side: `block` items on one side, the same on the next, and so on,
    the first side first in even blocks, the last first in odd ones (with one side: each item once)."""
    for b, start in enumerate(range(0, len(items), block)):
        for side in sides if b % 2 == 0 else reversed(sides):
            for item in items[start : start + block]:
                yield side, item


def timed(stub: OpenAIStub, measure: Callable[[], Any]) -> tuple[float, Any, int]:
    """(seconds, what `measure` returned, texts the stub computed a vector for meanwhile)."""
    vectors = computed(stub)
    started = time.perf_counter()
    got = measure()
    return time.perf_counter() - started, got, computed(stub) - vectors


def client_turns(queries: list[str], block: int = SEARCH_BLOCK) -> list[tuple[str, str]]:
    """(client, query) for each query: the first `CLIENTS` for two blocks of `block`, the next for two, and
    so on (`interleaved` alternates which server goes first by block: each client sees either first)."""
    return [(CLIENTS[(i // block // 2) % len(CLIENTS)], q) for i, q in enumerate(queries)]


def search_block(timed_queries: int) -> int:
    """The block the timed searches take turns by: `SEARCH_BLOCK`, smaller where fewer queries than one turn
    of each client are timed (a short run), so that every client still gets its turn."""
    return max(1, min(SEARCH_BLOCK, timed_queries // (2 * len(CLIENTS))))


def searches(sides: list[Side], stub: OpenAIStub, queries: list[str]) -> None:
    """`WARM_UP` searches on each side through each client, then the rest timed: interleaved across the
    sides, through the standard library's client in two blocks, httpx in the next two, and so on (each
    client sees either server first), each search timed with the CPU it cost this thread (the client's own
    share of the latency)."""

    def search(side: Side, client: str, q: str) -> dict[str, Any]:
        return side.sql(client, f"SELECT * FROM {PROJECT}.{KB} WHERE content = '{q}' LIMIT 10")

    warm_up, timed_queries = queries[:WARM_UP], queries[WARM_UP:]
    block = search_block(len(timed_queries))
    items = client_turns(timed_queries, block)
    seen: dict[tuple[str, str], dict[str, Any]] = {
        (s.name, c): {"latencies": [], "cpu": 0.0, "empty": 0, "computed": 0} for s in sides for c in CLIENTS
    }
    # queries not among the timed ones (a query-vector cache gains those nothing), through both clients
    for side, q in interleaved(sides, warm_up):
        for client in CLIENTS:
            search(side, client, q)
    previous: tuple[str, str] | None = None
    for side, (client, q) in interleaved(sides, items, block):
        if (side.name, client) != previous:  # a block starts: its connection made ready outside the timing
            side.ready(client)
            previous = side.name, client
        cpu = time.thread_time()
        seconds, answer, vectors = timed(stub, partial(search, side, client, q))
        mine = seen[side.name, client]
        mine["cpu"] += time.thread_time() - cpu
        mine["latencies"].append(seconds)
        mine["empty"] += not answer.get("data")
        mine["computed"] += vectors
    for side in sides:
        for client, key in zip(CLIENTS, ("search", "search_httpx"), strict=True):
            mine = seen[side.name, client]
            n = len(mine["latencies"])
            side.out[key] = {
                **summary_ms(mine["latencies"]),
                "queries": n,
                "qps": rate(n, sum(mine["latencies"])),
                "client": CLIENT_NAMES[client],
                "client_cpu_ms": round(1000 * mine["cpu"] / max(n, 1), 3),
                "empty_answers": mine["empty"],
                "stub_vectors_computed": mine["computed"],
                "interleaved": len(sides) > 1,
                "block": block,
            }
        print(
            f"    {side.name}: SQL KB searches p50 {side.out['search']['p50_ms']} ms of "
            f"{side.out['search']['queries']} ({CLIENT_NAMES['stdlib']}), {side.out['search_httpx']['p50_ms']} ms "
            f"of {side.out['search_httpx']['queries']} (httpx)",
            flush=True,
        )


def streams(sides: list[Side], stub: OpenAIStub, questions: list[str], completions: int) -> None:
    """An agent over the KB on each side, one warm-up run each, then `completions` streamed runs timed from
    the request to the first `data:` line and to the `end` chunk: interleaved across the sides."""
    path = f"/api/projects/{PROJECT}/agents/{AGENT}/completions/stream"

    def body(question: str) -> dict[str, Any]:
        return {"messages": [{"question": question, "answer": None}]}

    seen: dict[str, dict[str, Any]] = {
        s.name: {"first": [], "end": [], "outputs": 0, "sequences": {}, "chats": 0, "computed": 0}
        for s in sides
    }
    for side in sides:
        create_agent(side.client, side.agents, stub)
        side.stdlib.stream(path, body(questions[0]))  # warm-up
    runs = [questions[(i + 1) % len(questions)] for i in range(completions)]
    for side, question in interleaved(sides, runs, STREAM_BLOCK):
        chats = stub.chat_requests
        _, t, vectors = timed(stub, partial(side.stdlib.stream, path, body(question)))
        mine = seen[side.name]
        mine["chats"] += stub.chat_requests - chats
        mine["computed"] += vectors
        if t["first_data_s"] is not None:
            mine["first"].append(t["first_data_s"])
        if t["end_s"] is not None:
            mine["end"].append(t["end_s"])
        sequence = kinds(t["chunks"])
        mine["outputs"] += "output" in sequence or "data" in sequence  # agentkb's output, MindsDB's data
        key = ",".join(sequence)
        mine["sequences"][key] = mine["sequences"].get(key, 0) + 1
    for side in sides:
        mine = seen[side.name]
        side.out["stream"] = {
            "completions": completions,
            "start": summary_ms(mine["first"]),
            "end": summary_ms(mine["end"]),
            "with_output": mine["outputs"],
            "chunk_sequences": mine["sequences"],
            "stub_chat_requests": mine["chats"],
            "stub_vectors_computed": mine["computed"],
            "interleaved": len(sides) > 1,
        }
        print(
            f"    {side.name}: {completions} streamed completions: start p50 {side.out['stream']['start']['p50_ms']}"
            f" ms, end p50 {side.out['stream']['end']['p50_ms']} ms, sequences {mine['sequences']}",
            flush=True,
        )


def workload(
    sides: list[Side],
    stub: OpenAIStub,
    rows: list[dict[str, Any]],
    batch: int,
    queries: list[str],
    completions: int,
    questions: list[str],
) -> None:
    """The whole workload on `sides` (results in each side's `out`); their KB and agent dropped after."""
    for side in sides:
        load(side, stub, rows, batch)
    searches(sides, stub, queries)
    streams(sides, stub, questions, completions)
    for side in sides:
        drop(side.client, side.base)
