"""Knowledge-base ingestion throughput.

(a) raw embedder: the local all-MiniLM-L6-v2 (`LocalEmbedder.embed_documents`) on the texts, in this
    process: chunks/s and tokens/s (tokens as the model sees them: its tokenizer, truncated to its
    max_seq_length); with `--engine onnx`, sentence-transformers in float32 (the torch engine, precision
    float32), the reference the default install's engine is measured against;
(b) agentkb end to end over HTTP with the local model (`PUT .../knowledge_bases/{kb}` with rows, in
    requests of `--batch` rows; the KB's `embedding_model.engine` is `--engine`): chunks/s and the ratio
    to (a);
(c) the same with the instant stub embedder (bench/stubs.py): rows/s — the engine's own overhead;
(d) re-insert of the unchanged rows of (c): time and speed-up over (c);
(e) Chroma (`PersistentClient` in a temp dir, `collection.add` of the same chunks as (b) with
    sentence-transformers on the same bundled model): chunks/s and the ratio agentkb / Chroma.

Rows are `{"id", "body" (~500 characters of generated text), "topic"}`; one chunk each (default
chunk_size 1000). Counts are the server's, from the `X-Agentkb-Ingest` header.

    python -m bench ingest [--rows 10000] [--local-rows 2000] [--batch 1000] [--engine auto|torch|onnx]
                           [--quick] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import shutil
import tempfile
import time
from typing import Any

import httpx
import psutil

from bench.common import (
    CACHE,
    TextGenerator,
    add_counts,
    check,
    ingest_counts,
    print_table,
    rate,
    write_result,
)
from bench.server import agentkb_server, cpu_delta, cpu_seconds, py_spy, top_frames
from bench.stubs import bench_stub

MODEL = "all-MiniLM-L6-v2"


def make_rows(texts: list[str]) -> list[dict[str, Any]]:
    return [{"id": i, "body": text, "topic": f"topic{i % 16}"} for i, text in enumerate(texts)]


def create_kb(
    client: httpx.Client,
    kbs: str,
    name: str,
    embedding_model: dict[str, Any] | None,
    params: dict[str, Any] | None = None,
) -> None:
    body: dict[str, Any] = {
        "name": name,
        "id_column": "id",
        "content_columns": ["body"],
        "metadata_columns": ["topic"],
    }
    if embedding_model is not None:
        body["embedding_model"] = embedding_model
    if params is not None:
        body["params"] = params
    check(client.post(kbs, json={"knowledge_base": body}))


def insert(
    client: httpx.Client, kbs: str, name: str, rows: list[dict[str, Any]], batch: int
) -> tuple[float, dict[str, int]]:
    """PUT the rows in requests of `batch`; (seconds, summed X-Agentkb-Ingest counts)."""
    counts: dict[str, int] = {}
    started = time.perf_counter()
    for start in range(0, len(rows), batch):
        response = check(
            client.put(f"{kbs}/{name}", json={"knowledge_base": {"rows": rows[start : start + batch]}})
        )
        add_counts(counts, ingest_counts(response.headers.get("x-agentkb-ingest")))
    return time.perf_counter() - started, counts


def own_cpu() -> float:
    """CPU seconds (user + system, all threads) of this process so far."""
    times = psutil.Process().cpu_times()
    return times.user + times.system


def raw_embedder(texts: list[str], engine: str = "auto", precision: str = "auto") -> dict[str, Any]:
    from agentkb.kb.embedders.local import LocalEmbedder

    embedder = LocalEmbedder(MODEL, engine=engine, precision=precision)

    async def run() -> tuple[float, float, float, Any]:
        started = time.perf_counter()
        await embedder.warm()
        loaded = time.perf_counter() - started
        await embedder.embed_documents(texts[:32])  # first-call warm-up
        cpu = own_cpu()
        started = time.perf_counter()
        await embedder.embed_documents(texts)
        return loaded, time.perf_counter() - started, own_cpu() - cpu, embedder._model

    loaded, seconds, cpu, model = asyncio.run(run())
    tokenized = model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)
    tokens = sum(len(ids) for ids in tokenized["input_ids"])
    return {
        "chunks": len(texts),
        "seconds": seconds,
        "cpu_s": round(cpu, 2),
        "tokens": tokens,
        "load_s": loaded,
        "max_seq_length": model.max_seq_length,
    }


def chroma_add(texts: list[str], batch: int) -> dict[str, Any] | None:
    try:
        import chromadb
        from chromadb.utils.embedding_functions import SentenceTransformerEmbeddingFunction
    except ImportError:
        return None
    from agentkb.kb.embedders.local import resolve_model

    directory = tempfile.mkdtemp(prefix="chroma-bench-")
    try:
        started = time.perf_counter()
        function = SentenceTransformerEmbeddingFunction(
            model_name=resolve_model(MODEL), device="cpu", normalize_embeddings=True
        )
        function(texts[:32])  # load and warm up, as for agentkb
        loaded = time.perf_counter() - started
        client = chromadb.PersistentClient(path=directory)
        collection = client.create_collection(
            "bench_ingest", embedding_function=function, metadata={"hnsw:space": "cosine"}
        )
        cpu = own_cpu()
        started = time.perf_counter()
        for start in range(0, len(texts), batch):
            part = texts[start : start + batch]
            collection.add(
                ids=[str(start + i) for i in range(len(part))],
                documents=part,
                metadatas=[{"topic": f"topic{(start + i) % 16}"} for i in range(len(part))],
            )
        seconds = time.perf_counter() - started
        cpu = own_cpu() - cpu
        return {
            "chunks": collection.count(),
            "seconds": seconds,
            "cpu_s": round(cpu, 2),
            "load_s": loaded,
            "version": chromadb.__version__,
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench ingest", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, help="rows for the stub-embedder runs (c, d); default 10,000")
    parser.add_argument(
        "--local-rows", type=int, help="rows for the local-model runs (a, b, e); default 2,000"
    )
    parser.add_argument("--batch", type=int, default=1000, help="rows per PUT request (and per Chroma add)")
    parser.add_argument("--quick", action="store_true", help="1,000 stub rows, 500 local rows")
    parser.add_argument("--no-chroma", action="store_true")
    parser.add_argument(
        "--engine",
        choices=("auto", "torch", "onnx"),
        default="auto",
        help="the local KB's embedding engine in (b); with onnx, (a) is torch float32",
    )
    parser.add_argument(
        "--profile", action="store_true", help="py-spy the server during (b)-(d) into bench/.cache/profiles/"
    )
    args = parser.parse_args(argv)
    rows_n = args.rows or (1000 if args.quick else 10_000)
    local_n = args.local_rows or (500 if args.quick else 2000)
    profiles = CACHE / "profiles" if args.profile else None
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")

    texts = TextGenerator(seed=42).texts(max(rows_n, local_n))
    rows = make_rows(texts)
    local_texts = texts[:local_n]
    chars = sum(map(len, texts)) / len(texts)
    print(
        f"ingest: {rows_n:,} stub rows, {local_n:,} local-model rows, ~{chars:.0f} characters each, "
        f"{args.batch:,} rows per request"
    )

    onnx = args.engine == "onnx"
    raw = raw_embedder(local_texts, "torch", "float32") if onnx else raw_embedder(local_texts)
    local_model = (
        None if args.engine == "auto" else {"provider": "local", "model_name": MODEL, "engine": args.engine}
    )
    print(f"(a) raw embedder: {raw['chunks']} chunks in {raw['seconds']:.1f}s")

    with bench_stub() as stub, agentkb_server() as base, httpx.Client(timeout=900) as client:
        kbs = base.kbs
        create_kb(client, kbs, "warm_local", local_model)
        create_kb(client, kbs, "warm_stub", stub.embedding_model())
        create_kb(client, kbs, "bench_local", local_model)
        create_kb(client, kbs, "bench_stub", stub.embedding_model())
        started = time.perf_counter()
        insert(client, kbs, "warm_local", make_rows(texts[-8:]), args.batch)  # loads the model in the server
        warm_s = time.perf_counter() - started
        insert(client, kbs, "warm_stub", make_rows(texts[-8:]), args.batch)

        cpu = cpu_seconds(base)
        with py_spy(base.pid, profiles and profiles / f"ingest-local-{stamp}.txt"):
            local_s, local_counts = insert(client, kbs, "bench_local", rows[:local_n], args.batch)
        local_cpu = cpu_delta(cpu, cpu_seconds(base))
        print(f"(b) agentkb local: {local_counts.get('chunks')} chunks in {local_s:.1f}s")
        cpu = cpu_seconds(base)
        with py_spy(base.pid, profiles and profiles / f"ingest-stub-{stamp}.txt"):
            stub_s, stub_counts = insert(client, kbs, "bench_stub", rows[:rows_n], args.batch)
        stub_cpu = cpu_delta(cpu, cpu_seconds(base))
        print(f"(c) agentkb stub: {stub_counts.get('chunks')} chunks in {stub_s:.1f}s")
        stub_texts, stub_embed_s = stub.texts, stub.embed_s
        cpu = cpu_seconds(base)
        with py_spy(base.pid, profiles and profiles / f"ingest-reinsert-{stamp}.txt"):
            again_s, again_counts = insert(client, kbs, "bench_stub", rows[:rows_n], args.batch)
        again_cpu = cpu_delta(cpu, cpu_seconds(base))
        print(f"(d) re-insert: {again_s:.2f}s")
        stored = check(client.get(f"{kbs}/bench_stub")).json()

    chroma = None if args.no_chroma else chroma_add(local_texts, args.batch)

    raw_cps = raw["chunks"] / raw["seconds"]
    local_chunks = local_counts.get("chunks", 0)
    local_cps = local_chunks / local_s

    def cpu_text(used: dict[str, float]) -> str:
        return f"{used['server_python_cpu_s']:.1f} + pg {used['postgres_cpu_s']:.1f}"

    table = [
        {
            "phase": "(a) raw LocalEmbedder.embed_documents" + (", torch float32" if onnx else ""),
            "items": f"{raw['chunks']:,} chunks",
            "wall_s": round(raw["seconds"], 2),
            "cpu_s": f"{raw['cpu_s']:.1f}",
            "throughput": f"{rate(raw['chunks'], raw['seconds'])} chunks/s, {rate(raw['tokens'], raw['seconds']):,} tokens/s",
            "ratio": "1.00 (baseline)",
        },
        {
            "phase": "(b) agentkb PUT, local model" + (f", engine {args.engine}" if local_model else ""),
            "items": f"{local_chunks:,} chunks",
            "wall_s": round(local_s, 2),
            "cpu_s": cpu_text(local_cpu),
            "throughput": f"{rate(local_chunks, local_s)} chunks/s",
            "ratio": f"{local_cps / raw_cps:.2f} of raw",
        },
        {
            "phase": "(c) agentkb PUT, stub embedder",
            "items": f"{stub_counts.get('documents', 0):,} rows",
            "wall_s": round(stub_s, 2),
            "cpu_s": cpu_text(stub_cpu),
            "throughput": f"{rate(stub_counts.get('documents', 0), stub_s)} rows/s",
            "ratio": "target ≥ 5,000 rows/s",
        },
        {
            "phase": "(d) re-insert unchanged rows",
            "items": f"{again_counts.get('documents', 0):,} rows",
            "wall_s": round(again_s, 2),
            "cpu_s": cpu_text(again_cpu),
            "throughput": f"{rate(again_counts.get('documents', 0), again_s)} rows/s",
            "ratio": f"{stub_s / again_s:.1f}× faster than (c) (target ≥ 50×)",
        },
    ]
    if chroma is not None:
        chroma_cps = chroma["chunks"] / chroma["seconds"]
        table.append(
            {
                "phase": f"(e) Chroma {chroma['version']} collection.add, same model",
                "items": f"{chroma['chunks']:,} chunks",
                "wall_s": round(chroma["seconds"], 2),
                "cpu_s": f"{chroma['cpu_s']:.1f}",
                "throughput": f"{rate(chroma['chunks'], chroma['seconds'])} chunks/s",
                "ratio": f"agentkb/Chroma = {local_cps / chroma_cps:.2f}",
            }
        )
    print_table(
        f"ingest: {MODEL} (local, CPU) and the instant stub embedder; rows of ~{chars:.0f} characters, "
        f"{args.batch:,} rows per request",
        table,
    )
    print(
        "\ncpu_s: CPU seconds used: this process for (a) and (e); the server's Python process + its PostgreSQL "
        "processes for (b)-(d)"
    )
    print(
        f"mean tokens per chunk: {raw['tokens'] / raw['chunks']:.0f} (max_seq_length {raw['max_seq_length']}); "
        f"model load: {raw['load_s']:.1f}s in-process, {warm_s:.1f}s for the server's first (8-row) insert"
    )
    print(f"server counts: (b) {local_counts}\n  (c) {stub_counts}\n  (d) {again_counts}")
    print(f"stub: {stub_texts:,} texts embedded, {stub_embed_s:.2f}s computing vectors")
    profiles_out = {}
    if profiles is not None:
        for phase in ("local", "stub", "reinsert"):
            path = profiles / f"ingest-{phase}-{stamp}.txt"
            if path.exists():
                profiles_out[phase] = str(path)
                print(
                    f"\npy-spy of the server ({phase}), {path}\n  % of samples in stack, % innermost, frame:"
                )
                for frame, inclusive, own in top_frames(path, 25, interesting=True):
                    print(f"  {inclusive:5.1f} {own:5.1f}  {frame}")
    write_result(
        "ingest",
        {
            "model": MODEL,
            "engine": args.engine,
            "stub_embedder": "bench.stubs.HashedBow (384-d)",
            "quick": args.quick,
            "rows": rows_n,
            "local_rows": local_n,
            "rows_per_request": args.batch,
            "mean_chars": round(chars, 1),
            "raw_embedder": {
                **raw,
                "chunks_per_s": round(raw_cps, 1),
                "tokens_per_s": round(raw["tokens"] / raw["seconds"], 1),
            },
            "agentkb_local": {
                "seconds": local_s,
                "cpu": local_cpu,
                "counts": local_counts,
                "chunks_per_s": round(local_cps, 1),
                "ratio_to_raw": round(local_cps / raw_cps, 3),
                "server_model_load_s": warm_s,
            },
            "agentkb_stub": {
                "seconds": stub_s,
                "cpu": stub_cpu,
                "counts": stub_counts,
                "rows_per_s": round(stub_counts.get("documents", 0) / stub_s, 1),
                "stub_embed_s": stub_embed_s,
                "stub_texts": stub_texts,
            },
            "reinsert": {
                "seconds": again_s,
                "cpu": again_cpu,
                "counts": again_counts,
                "speedup": round(stub_s / again_s, 1),
            },
            "kb_after": {k: stored.get(k) for k in ("document_count", "chunk_count")},
            "chroma": None
            if chroma is None
            else {
                **chroma,
                "chunks_per_s": round(chroma["chunks"] / chroma["seconds"], 1),
                "agentkb_over_chroma": round(local_cps / (chroma["chunks"] / chroma["seconds"]), 3),
            },
            "profiles": profiles_out,
            "table": table,
        },
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
