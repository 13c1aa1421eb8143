"""Retrieval quality on BEIR SciFact (test: 300 queries, 5,183 abstracts) through agentkb's own HTTP API.

Each document is one row `{"_id", "text": title + ". " + abstract}` and one chunk (the KB's chunk_size is
set above the longest document, overlap 0), so document-level metrics are clean. The embedder is
all-MiniLM-L6-v2: its vectors for the corpus and the queries are computed once with agentkb's
`LocalEmbedder` and cached under bench/.cache/beir-scifact/; the KB then embeds through a stub
OpenAI-compatible server that serves those cached vectors (falling back to the real model for any text
not cached), so a run takes seconds. `--no-cache` makes the KB embed with the local model itself.

The queries go through `POST .../search` with limit 100: vector only (`hybrid_search: false`), full text
only (`hybrid_search_alpha: 0`), hybrid (the default: alpha 0.5, RRF k 60) and alpha 0.3 / 0.7, then a
sweep of the RRF constant through the API's `fusion_k` (alpha 0.5 and 0.7). On a server without
`fusion_k` the sweep is computed client side instead, by weighted RRF over the API's own vector and
full-text rankings (top 100 each; the server fuses its top 400 each): an estimate. Metrics: nDCG@10,
recall@100, MRR@10; and recall@10 of the vector search against exact search over the same vectors.

    python -m bench beir [--quick] [--no-cache]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common import CACHE, check, ingest_counts, print_table, summary_ms, write_result
from bench.server import agentkb_server
from bench.stubs import CachedEmbeddings, bench_stub

DATA = Path("/work/shared/data/scifact")
MODEL = "all-MiniLM-L6-v2"
KB = "scifact"
LIMIT = 100
REFERENCE = "dense nDCG@10 0.648, BM25 0.662, RRF k=60 0.683, RRF k=2 0.703 (same machine, outside agentkb)"
MODES: dict[str, dict[str, Any]] = {
    "vector": {"hybrid_search": False},
    "full text": {"hybrid_search_alpha": 0.0},
    "hybrid (default: alpha 0.5, k 60)": {},
    "hybrid alpha 0.3": {"hybrid_search_alpha": 0.3},
    "hybrid alpha 0.7": {"hybrid_search_alpha": 0.7},
}
FUSION_KS = (1, 2, 5, 10, 20, 60)
SWEEP_ALPHAS = (0.5, 0.7)


# --- metrics --------------------------------------------------------------------------------------------


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], relevant: dict[str, int], k: int = 100) -> float:
    wanted = {d for d, r in relevant.items() if r > 0}
    return len(wanted & set(ranked[:k])) / len(wanted) if wanted else 0.0


def mrr_at(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    return next((1.0 / (i + 1) for i, d in enumerate(ranked[:k]) if relevant.get(d, 0) > 0), 0.0)


def evaluate(runs: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    ids = list(runs)
    return {
        "ndcg@10": round(float(np.mean([ndcg_at(runs[q], qrels[q]) for q in ids])), 4),
        "recall@100": round(float(np.mean([recall_at(runs[q], qrels[q]) for q in ids])), 4),
        "mrr@10": round(float(np.mean([mrr_at(runs[q], qrels[q]) for q in ids])), 4),
    }


def rrf(rankings: list[tuple[float, list[str]]], k: int) -> list[str]:
    scores: dict[str, float] = defaultdict(float)
    for weight, ranking in rankings:
        if weight > 0:
            for rank, doc in enumerate(ranking, start=1):
                scores[doc] += weight / (k + rank)
    return sorted(scores, key=lambda d: -scores[d])


# --- data -----------------------------------------------------------------------------------------------


def load() -> tuple[list[tuple[str, str]], list[tuple[str, str]], dict[str, dict[str, int]]]:
    """(corpus [(id, content)], queries [(id, text)] with judgements, qrels {query: {doc: score}})."""
    corpus = []
    with gzip.open(DATA / "corpus.jsonl.gz", "rt") as f:
        for line in f:
            doc = json.loads(line)
            title, text = doc.get("title", "").strip(), doc.get("text", "").strip()
            corpus.append((str(doc["_id"]), f"{title}. {text}" if title else text))
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for line in (DATA / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        query_id, doc_id, score = line.split("\t")
        qrels[query_id][doc_id] = int(score)
    queries = []
    for line in (DATA / "queries.jsonl").read_text().splitlines():
        q = json.loads(line)
        if str(q["_id"]) in qrels:
            queries.append((str(q["_id"]), q["text"].strip()))
    return corpus, queries, dict(qrels)


def _digest(texts: list[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def local_encoder() -> Callable[[list[str]], np.ndarray]:
    """agentkb's own local embedding (sentence-transformers, batches of 64, normalised), synchronous."""
    from agentkb.kb.embedders.local import DEFAULT_BATCH_SIZE, _encode, load_model

    model = load_model(MODEL)
    return lambda texts: _encode(model, list(texts), DEFAULT_BATCH_SIZE)


def cached_vectors(texts: list[str], name: str) -> tuple[np.ndarray, dict[str, Any]]:
    """The model's vectors for `texts`, from bench/.cache/beir-scifact/<name>-<digest>.npy or computed
    (with agentkb's LocalEmbedder) and saved there."""
    directory = CACHE / "beir-scifact"
    path = directory / f"{name}-{MODEL}-{_digest(texts)}.npy"
    if path.exists():
        return np.load(path), {"cached": True, "path": str(path)}
    import asyncio

    from agentkb.kb.embedders.local import LocalEmbedder

    embedder = LocalEmbedder(MODEL)
    print(f"embedding {len(texts):,} {name} texts with {MODEL} (once; cached in {path})", flush=True)

    async def run() -> tuple[np.ndarray, float]:
        await embedder.warm()
        started = time.perf_counter()
        vectors = await embedder.embed_documents(texts)
        return vectors, time.perf_counter() - started

    vectors, seconds = asyncio.run(run())
    directory.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    print(f"  {len(texts):,} texts in {seconds:.0f}s ({len(texts) / seconds:.1f}/s)", flush=True)
    return vectors, {"cached": False, "path": str(path), "seconds": round(seconds, 1)}


# --- the run --------------------------------------------------------------------------------------------


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench beir", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the first 100 queries")
    parser.add_argument("--queries", type=int, help="the first N queries (default all 300)")
    parser.add_argument("--no-cache", action="store_true", help="the KB embeds with the local model itself")
    args = parser.parse_args(argv)

    corpus, all_queries, qrels = load()
    queries = all_queries[: args.queries or (100 if args.quick else len(all_queries))]
    contents = [c for _, c in corpus]
    chunk_size = max(4000, (max(map(len, contents)) // 1000 + 1) * 1000)
    print(f"beir scifact: {len(corpus):,} documents, {len(queries)} queries, chunk_size {chunk_size}")

    embedding: dict[str, Any] = {"model": MODEL}
    stub_embed: CachedEmbeddings | None = None
    if not args.no_cache:
        doc_vectors, embedding["corpus"] = cached_vectors(contents, "corpus")
        query_vectors, embedding["queries"] = cached_vectors([t for _, t in all_queries], "queries")
        table = dict(zip(contents, doc_vectors, strict=True))
        table.update(zip([t for _, t in all_queries], query_vectors, strict=True))
        stub_embed = CachedEmbeddings(table, fallback=lambda texts: local_encoder()(texts))

    rows = [{"_id": doc_id, "text": content} for doc_id, content in corpus]
    runs: dict[str, dict[str, list[str]]] = {}
    latency: dict[str, dict[str, float]] = {}
    with bench_stub(stub_embed) as stub, agentkb_server() as base, httpx.Client(timeout=3600) as client:
        model = None if args.no_cache else stub.embedding_model(model_name=f"{MODEL}-cached")
        body: dict[str, Any] = {
            "name": KB,
            "id_column": "_id",
            "content_columns": ["text"],
            "params": {"chunk_size": chunk_size, "chunk_overlap": 0},
        }
        if model is not None:
            body["embedding_model"] = model
        check(client.post(base.kbs, json={"knowledge_base": body}))
        counts: dict[str, int] = {}
        started = time.perf_counter()
        for start in range(0, len(rows), 1000):
            response = check(
                client.put(f"{base.kbs}/{KB}", json={"knowledge_base": {"rows": rows[start : start + 1000]}})
            )
            for key, value in ingest_counts(response.headers.get("x-agentkb-ingest")).items():
                counts[key] = counts.get(key, 0) + value
        ingest_s = time.perf_counter() - started
        print(
            f"ingested {counts.get('documents')} documents, {counts.get('chunks')} chunks in {ingest_s:.1f}s",
            flush=True,
        )
        if counts.get("chunks") != len(corpus):
            print(f"warning: {counts.get('chunks')} chunks for {len(corpus)} documents")
        url = f"{base.kbs}/{KB}/search"

        def run(mode: str, options: dict[str, Any]) -> None:
            ranked: dict[str, list[str]] = {}
            times = []
            for query_id, text in queries:
                t = time.perf_counter()
                hits = check(client.post(url, json={"query": text, "limit": LIMIT, **options})).json()
                times.append(time.perf_counter() - t)
                ranked[query_id] = list(dict.fromkeys(str(h["id"]) for h in hits))  # documents, best first
            runs[mode] = ranked
            latency[mode] = summary_ms(times)
            print(f"  {mode}: nDCG@10 {evaluate(ranked, qrels)['ndcg@10']}", flush=True)

        for mode, options in MODES.items():
            run(mode, options)
        probe = client.post(url, json={"query": queries[0][1], "limit": 1, "fusion_k": 2})
        api_fusion_k = probe.status_code == 200
        if api_fusion_k:
            for alpha in SWEEP_ALPHAS:
                for k in FUSION_KS:
                    run(f"sweep alpha {alpha} k {k}", {"hybrid_search_alpha": alpha, "fusion_k": k})

    scores = {mode: evaluate(ranked, qrels) for mode, ranked in runs.items()}
    table = [
        {"mode": mode, **scores[mode], "p50_ms": latency[mode]["p50_ms"], "p95_ms": latency[mode]["p95_ms"]}
        for mode in MODES
    ]
    print_table(
        f"beir scifact ({len(queries)} queries, {len(corpus):,} documents): agentkb POST /search, "
        f"limit {LIMIT}, {MODEL}",
        table,
    )
    print(f"\nreference ({REFERENCE}); target hybrid ≥ 0.70")

    sweep = []
    if api_fusion_k:
        for alpha in SWEEP_ALPHAS:
            for k in FUSION_KS:
                mode = f"sweep alpha {alpha} k {k}"
                sweep.append(
                    {"alpha": alpha, "fusion_k": k, **scores[mode], "p50_ms": latency[mode]["p50_ms"]}
                )
        title = "fusion_k sweep through the API (hybrid_search_alpha, fusion_k)"
    else:
        vector, text = runs["vector"], runs["full text"]
        for alpha in SWEEP_ALPHAS:
            for k in FUSION_KS:
                fused = {q: rrf([(alpha, vector[q]), (1 - alpha, text[q])], k) for q in vector}
                sweep.append({"alpha": alpha, "k": k, **evaluate(fused, qrels)})
        title = (
            "the server has no fusion_k: client-side weighted RRF over the API's vector and full-text "
            "rankings (top 100 each), an estimate"
        )
    print_table(title, sweep)
    exact_recall = None
    if not args.no_cache:  # the HNSW index against exact search over the same (real MiniLM) vectors
        doc_ids = [doc_id for doc_id, _ in corpus]
        positions = {t: i for i, (_, t) in enumerate(all_queries)}
        wanted = query_vectors[[positions[t] for _, t in queries]]
        exact = np.argsort(-(wanted @ doc_vectors.T), axis=1)[:, :10]
        exact_recall = round(
            float(
                np.mean(
                    [
                        len({doc_ids[i] for i in exact[n]} & set(runs["vector"][query_id][:10])) / 10
                        for n, (query_id, _) in enumerate(queries)
                    ]
                )
            ),
            4,
        )
        print(f"\nvector search recall@10 against exact search over the same MiniLM vectors: {exact_recall}")
    if stub_embed is not None:
        print(
            f"\nembedding cache: {stub_embed.hits:,} hits, {stub_embed.misses:,} misses (embedded with the model)"
        )
    write_result(
        "beir",
        {
            "model": MODEL,
            "dataset": "BEIR SciFact test",
            "quick": args.quick,
            "queries": len(queries),
            "documents": len(corpus),
            "chunk_size": chunk_size,
            "limit": LIMIT,
            "embedding": embedding,
            "embedding_cache": None
            if stub_embed is None
            else {"hits": stub_embed.hits, "misses": stub_embed.misses},
            "ingest": {
                "seconds": round(ingest_s, 2),
                "counts": counts,
                "docs_per_s": round(len(corpus) / ingest_s, 1),
                "embedder": "local (in agentkb)" if args.no_cache else "cached vectors via stub",
            },
            "scores": scores,
            "latency": latency,
            "vector_recall_at_10_vs_exact": exact_recall,
            "fusion_sweep": sweep,
            "fusion_sweep_via_api": api_fusion_k,
            "reference": REFERENCE,
            "table": table,
        },
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
