"""Token streaming: how soon a `/v1/chat/completions` stream client sees the model's first token.

One agent on the scripted stub model (`bench_stub()`), which streams a `--words`-word answer, one word
every `--word-ms` milliseconds. For each of `--runs` streamed completions (the `openai` SDK's wire format,
read over httpx as it arrives), the stub records when it sent the first word and the client when the first
`delta.content` arrived (one clock: both run in this process): their difference is what agentkb adds
between the model's first token and the client's. Also counted: content chunks per run (one per model
delta is the goal) and the time from the model's last word to the client's last content.

    python -m bench tokens [--runs 30] [--words 20] [--word-ms 30] [--quick]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import httpx

from bench.common import check, print_table, summary_ms, write_result

FIRST_TOKEN_TARGET_MS = 80.0


def _run(client: httpx.Client, agent: str, stub: Any) -> dict[str, float]:
    sent_before = len(stub.content_sent)
    first_client = last_client = None
    chunks = 0
    body = {"model": agent, "messages": [{"role": "user", "content": "Tell me."}], "stream": True}
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        check(response)
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            choices = chunk.get("choices") or []
            if choices and choices[0]["delta"].get("content"):
                now = time.perf_counter()
                first_client = first_client or now
                last_client = now
                chunks += 1
    sent = stub.content_sent[sent_before:]
    assert first_client is not None and last_client is not None and sent, "no content came"
    return {
        "first_s": first_client - sent[0],
        "last_s": last_client - sent[-1],
        "chunks": chunks,
        "model_chunks": len(sent),
    }


def main(argv: list[str]) -> None:
    from bench.server import agentkb_server
    from bench.stubs import bench_stub
    from tests.openai_stub import text

    parser = argparse.ArgumentParser(prog="python -m bench tokens", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, help="streamed completions (default 30; --quick 10)")
    parser.add_argument("--words", type=int, default=20)
    parser.add_argument("--word-ms", type=float, default=30.0)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    runs = args.runs or (10 if args.quick else 30)
    answer = " ".join(f"word{i}" for i in range(args.words))
    with (
        bench_stub(chat_script=lambda body: text(answer, word_delay=args.word_ms / 1000)) as stub,
        agentkb_server() as server,
        httpx.Client(base_url=str(server), timeout=120) as client,
    ):
        model = {"provider": "openai", "model_name": "stub", "api_key": "sk-bench", "base_url": stub.url}
        check(client.post("/api/projects/mindsdb/agents", json={"agent": {"name": "writer", "model": model}}))
        for _ in range(3):  # warm-up
            _run(client, "writer", stub)
        results = [_run(client, "writer", stub) for _ in range(runs)]
    first = summary_ms([r["first_s"] for r in results])
    last = summary_ms([r["last_s"] for r in results])
    per_delta = all(r["chunks"] == r["model_chunks"] for r in results)
    rows = [
        {
            "measure": "first content after the model's first token",
            **first,
            "target_ms": FIRST_TOKEN_TARGET_MS,
            "met": "yes" if first["p50_ms"] <= FIRST_TOKEN_TARGET_MS else "NO",
        },
        {"measure": "last content after the model's last token", **last},
    ]
    print_table(f"tokens: /v1 stream, {args.words} words {args.word_ms:g} ms apart, {runs} runs", rows)
    print(f"one content chunk per model delta in every run: {per_delta}")
    write_result(
        "tokens",
        {
            "quick": args.quick,
            "runs": runs,
            "words": args.words,
            "word_ms": args.word_ms,
            "one_chunk_per_delta": per_delta,
            "table": rows,
            "note": f"One content chunk per model delta in every run: {'yes' if per_delta else 'NO'}.",
        },
    )
