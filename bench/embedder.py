"""The local embedder's engines and precisions on SciFact: throughput, closeness to float32, retrieval.

Each variant embeds the same SciFact subset through agentkb's own code (kb/embedders: `load_model` +
`_encode` for torch, `onnx_model` for ONNX Runtime): the documents sorted by length, longest first, in
batches of `--batch`, on `--threads` threads. Reported per variant: documents per second (wall clock, best
of `--repeat` runs, and per CPU-second of the process, which the other load on a shared machine disturbs
less), the cosine of each document vector to torch float32's (min and mean), and nDCG@10 of exact cosine
search over the subset for the queries whose judged documents it holds (the subset: every judged document
of the first `--queries` queries, then the corpus in order up to `--docs`).

Variants: `torch-float32` (the reference), `torch-bfloat16`, `onnx-int8` (the default install's engine:
the bundled model of kb/embedders/minilm/, built by bench/minilm_onnx.py), `onnx:<path>` (another ONNX file
of all-MiniLM-L6-v2 with the bundled tokenizer, e.g. a candidate built by a changed bench/minilm_onnx.py),
`torch-int8-<layers>` (torch dynamic int8 on some Linear layers only: `ffn-in` the FFN up-projections,
`ffn` both FFN projections, `attn` the attention's query/key/value, `attn+ffn-in` those two, `all` every
Linear of the encoder), `torch-compile` (float32 under `torch.compile`, inductor, dynamic shapes) and
`torch-compile-frozen` (the same with inductor's freezing and weight prepacking): measurements only, not
agentkb options. A compiled variant's first pass (the compilation, about 1–2 minutes) is not timed.

    python -m bench embedder [--quick] [--docs N] [--queries N] [--threads T] [--batch B] [--variants ...]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.beir import load, ndcg_at
from bench.common import print_table, write_result

MODEL = "all-MiniLM-L6-v2"
VARIANTS = ("torch-float32", "torch-bfloat16", "onnx-int8", "torch-int8-ffn-in", "torch-int8-all")
INT8_LAYERS: dict[str, tuple[str, ...] | None] = {
    "ffn-in": ("intermediate.dense",),
    "ffn": ("intermediate.dense", "output.dense"),
    "attn": ("attention.self.query", "attention.self.key", "attention.self.value"),
    "attn+ffn-in": (
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "intermediate.dense",
    ),
    "all": None,
}
Encoder = Callable[[list[str]], np.ndarray]


def subset(
    docs: int, queries: int
) -> tuple[list[tuple[str, str]], list[tuple[str, str]], dict[str, dict[str, int]]]:
    """(documents, queries, qrels): every judged document of the first `queries` queries, then the corpus
    in order up to `docs` documents."""
    corpus, all_queries, qrels = load()
    chosen = all_queries[:queries]
    wanted = {d for q, _ in chosen for d in qrels[q]}
    picked = [c for c in corpus if c[0] in wanted]
    picked += [c for c in corpus if c[0] not in wanted][: max(0, docs - len(picked))]
    return picked, chosen, {q: qrels[q] for q, _ in chosen}


def _torch_int8(model: Any, layers: tuple[str, ...] | None) -> Any:
    """A copy of `model` with torch dynamic int8 on the named Linear layers of every encoder block."""
    import copy

    import torch

    model = copy.deepcopy(model)
    for block in model[0].auto_model.encoder.layer:
        for name, module in list(block.named_modules()):
            if isinstance(module, torch.nn.Linear) and (layers is None or name in layers):
                wrapped = torch.ao.quantization.quantize_dynamic(
                    torch.nn.Sequential(module), {torch.nn.Linear}, dtype=torch.qint8
                )
                parent, _, leaf = name.rpartition(".")
                setattr(block.get_submodule(parent) if parent else block, leaf, wrapped[0])
    return model


def _compiled(model: Any, frozen: bool) -> Any:
    """`model` with its transformer under `torch.compile` (inductor, dynamic shapes); `frozen`: weights
    folded in as constants and prepacked (inductor's `freezing`, which needs inference mode)."""
    import torch
    import torch._inductor.config as inductor

    if frozen:
        inductor.freezing = True
        inductor.cpp.weight_prepack = True
    model.eval()
    model[0].auto_model = torch.compile(model[0].auto_model, dynamic=True)
    if frozen:
        encode = model.encode

        def encode_no_grad(*args: Any, **kwargs: Any) -> Any:
            with torch.no_grad():
                return encode(*args, **kwargs)

        model.encode = encode_no_grad
    return model


def encoder(variant: str, threads: int, batch: int) -> Encoder:
    """A synchronous `texts -> vectors` for `variant`, through agentkb's embedder code."""
    from agentkb.kb.embedders import local, onnx_model

    if variant == "onnx-int8" or variant.startswith("onnx:"):
        model = (
            onnx_model.load(MODEL, bundled=True, threads=threads)
            if variant == "onnx-int8"
            else onnx_model.OnnxModel(Path(variant[5:]), onnx_model.BUNDLED_TOKENIZER, threads)
        )
        return lambda texts: np.concatenate(
            [model.encode(texts[i : i + batch]) for i in range(0, len(texts), batch)]
        )
    import torch

    torch.set_num_threads(threads)
    if variant.startswith("torch-int8-"):
        torch_model = _torch_int8(local.load_model(MODEL), INT8_LAYERS[variant.removeprefix("torch-int8-")])
    elif variant.startswith("torch-compile"):
        torch_model = _compiled(local.load_model(MODEL), frozen=variant == "torch-compile-frozen")
    else:
        torch_model = local.load_model(MODEL, precision=variant.removeprefix("torch-"))
    return lambda texts: local._encode(torch_model, texts, batch)


def measure(encode: Encoder, texts: list[str], repeat: int) -> tuple[np.ndarray, float, float]:
    """(vectors, best wall docs/s, docs per CPU-second of that run) for `texts`, after one warm-up batch."""
    encode(texts[:8])
    best: tuple[float, float] = (0.0, 0.0)
    vectors = np.zeros((0, 0), dtype=np.float32)
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = encode(texts)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        best = max(best, (len(texts) / wall, len(texts) / cpu))
    return vectors, round(best[0], 1), round(best[1], 1)


def ndcg(doc_ids: list[str], docs: np.ndarray, queries: np.ndarray, qrels: list[dict[str, int]]) -> float:
    scores = queries @ docs.T
    ranked = [[doc_ids[i] for i in np.argsort(-row)[:10]] for row in scores]
    return round(float(np.mean([ndcg_at(r, q) for r, q in zip(ranked, qrels, strict=True)])), 4)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench embedder", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 documents, 50 queries, one run each")
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    args = parser.parse_args(argv)
    if args.quick:
        args.docs, args.queries, args.repeat = 200, 50, 1
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    docs, queries, qrels = subset(args.docs, args.queries)
    ordered = sorted(docs, key=lambda d: len(d[1]), reverse=True)
    doc_ids, texts = [d for d, _ in ordered], [t for _, t in ordered]
    query_texts, judged = [t for _, t in queries], [qrels[q] for q, _ in queries]
    print(
        f"embedder: {len(texts)} SciFact documents, {len(queries)} queries, {args.threads} threads, "
        f"batches of {args.batch}",
        flush=True,
    )
    reference: np.ndarray | None = None
    rows: list[dict[str, Any]] = []
    for variant in ["torch-float32", *[v for v in args.variants if v != "torch-float32"]]:
        encode = encoder(variant, args.threads, args.batch)
        if variant.startswith("torch-compile"):
            encode(texts)  # compiles for each new shape: this pass is not timed
        vectors, wall_rate, cpu_rate = measure(encode, texts, args.repeat)
        if reference is None:
            reference = vectors
        cosine = (vectors * reference).sum(axis=1)
        row = {
            "variant": variant,
            "docs/s": wall_rate,
            "docs/CPU-s": cpu_rate,
            "× float32 (CPU-s)": round(cpu_rate / rows[0]["docs/CPU-s"], 2) if rows else 1.0,
            "cosine min": round(float(cosine.min()), 4),
            "cosine mean": round(float(cosine.mean()), 5),
            "nDCG@10": ndcg(doc_ids, vectors, encode(query_texts), judged),
            "load avg": round(os.getloadavg()[0], 2),
        }
        rows.append(row)
        print(row, flush=True)
    for row in rows[1:]:
        row["ΔnDCG@10"] = round(row["nDCG@10"] - rows[0]["nDCG@10"], 4)
    print_table("local embedder", rows)
    settings = {"docs": len(texts), "queries": len(queries), "threads": args.threads, "batch": args.batch}
    from agentkb.kb.embedders import cpu

    note = (
        f"{len(texts)} documents (longest first, batches of {args.batch}, {args.threads} thread(s)), "
        f"{len(queries)} queries; this CPU {'has' if cpu.has_bf16() else 'has no'} hardware bfloat16 "
        f"(avx512_bf16 / amx_bf16) and {'has' if cpu.has_vnni() else 'has no'} int8 dot products "
        "(avx512_vnni / avx_vnni / amx_int8: ONNX Runtime's int8 kernels). `docs/s`: wall clock, best of "
        "the runs; `docs/CPU-s`: per CPU-second "
        "of the process, steadier than the wall clock on a shared machine, and the ratio to float32 is "
        "taken on it; `load avg`: the 1-minute load "
        "average after the variant ran."
    )
    payload = {"quick": args.quick, "model": MODEL, "settings": settings, "table": rows, "note": note}
    write_result("embedder", payload)
