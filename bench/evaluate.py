"""agentkb's own `EVALUATE KNOWLEDGE_BASE` on BEIR SciFact: hit@k, MRR and recall from the evaluator itself.

The knowledge base is bench/beir.py's (5,183 abstracts, one chunk each, all-MiniLM-L6-v2 vectors cached
under bench/.cache/beir-scifact/ and served by the stub embedder; `--no-cache`: the KB embeds with the local
model). The test table is BEIR's: each test query as `question`, its judged-relevant abstracts as `doc_id`
(a list), uploaded as `files.scifact_test`; no LLM is needed. Then, through `POST /api/sql/query`:

    EVALUATE KNOWLEDGE_BASE scifact USING test_table = files.scifact_test, top_k = 100

(the KB's default search: hybrid, alpha 0.5, RRF k 60). The run is read back from
`GET …/evaluations/{id}`, and its per-question rankings are scored again here with bench/beir.py's own
metric functions as a check; the newest `python -m bench beir` result's hybrid row sits beside it.

    python -m bench evaluate [--quick] [--no-cache]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import httpx
import numpy as np

from bench import beir
from bench.common import check, print_table, results, sql, write_result
from bench.server import agentkb_server
from bench.stubs import CachedEmbeddings, bench_stub

TEST_FILE = "scifact_test"
TOP_K = 100
HYBRID = "hybrid (default: alpha 0.5, k 60)"


def _beir_reference(quick: bool, queries: int) -> dict[str, Any] | None:
    """The newest bench/results/beir result (by the time inside) of the same kind (quick or full) and number
    of queries: its hybrid default row."""
    for _, path, data in reversed(results("beir")):
        if (
            bool(data.get("quick")) == quick
            and data.get("queries") == queries
            and HYBRID in data.get("scores", {})
        ):
            return {"file": path.name, **data["scores"][HYBRID]}
    return None


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the first 100 test queries")
    parser.add_argument("--queries", type=int, help="the first N test queries (default all 300)")
    parser.add_argument("--no-cache", action="store_true", help="the KB embeds with the local model itself")
    args = parser.parse_args(argv)

    corpus, all_queries, qrels = beir.load()
    queries = all_queries[: args.queries or (100 if args.quick else len(all_queries))]
    contents = [c for _, c in corpus]
    chunk_size = max(4000, (max(map(len, contents)) // 1000 + 1) * 1000)
    print(f"evaluate scifact: {len(corpus):,} documents, {len(queries)} test queries, top_k {TOP_K}")
    stub_embed: CachedEmbeddings | None = None
    if not args.no_cache:
        doc_vectors, _ = beir.cached_vectors(contents, "corpus")
        query_vectors, _ = beir.cached_vectors([t for _, t in all_queries], "queries")
        vectors = dict(zip(contents, doc_vectors, strict=True))
        vectors.update(zip([t for _, t in all_queries], query_vectors, strict=True))
        stub_embed = CachedEmbeddings(vectors, fallback=lambda texts: beir.local_encoder()(texts))
    tests = [
        {"question": text, "doc_id": sorted(d for d, score in qrels[query_id].items() if score > 0)}
        for query_id, text in queries
    ]
    rows = [{"_id": doc_id, "text": content} for doc_id, content in corpus]
    with bench_stub(stub_embed) as stub, agentkb_server() as base, httpx.Client(timeout=3600) as client:
        body: dict[str, Any] = {
            "name": beir.KB,
            "id_column": "_id",
            "content_columns": ["text"],
            "params": {"chunk_size": chunk_size, "chunk_overlap": 0},
        }
        if not args.no_cache:
            body["embedding_model"] = stub.embedding_model(model_name=f"{beir.MODEL}-cached")
        check(client.post(base.kbs, json={"knowledge_base": body}))
        started = time.perf_counter()
        for start in range(0, len(rows), 1000):
            check(
                client.put(
                    f"{base.kbs}/{beir.KB}", json={"knowledge_base": {"rows": rows[start : start + 1000]}}
                )
            )
        ingest_s = time.perf_counter() - started
        print(f"ingested {len(rows):,} documents in {ingest_s:.1f}s", flush=True)
        upload = json.dumps(tests).encode()
        check(client.put(f"{base}/api/files/{TEST_FILE}", files={"file": (f"{TEST_FILE}.json", upload)}))
        started = time.perf_counter()
        answer = sql(
            client,
            base,
            f"EVALUATE KNOWLEDGE_BASE {beir.KB} USING test_table = files.{TEST_FILE}, top_k = {TOP_K}",
        )
        evaluate_s = time.perf_counter() - started
        row = dict(zip(answer["column_names"], answer["data"][0], strict=True))
        run = check(client.get(f"{base.kbs}/{beir.KB}/evaluations/{row['id']}")).json()

    hit, recall, mrr = (json.loads(row[k]) for k in ("hit_at_k", "recall_at_k", "mrr_at_k"))
    # the same rankings, scored by bench/beir.py's functions: EVALUATE's arithmetic, checked
    ranked = {q: item["retrieved"] for (q, _), item in zip(queries, run["results"], strict=True)}
    check_scores = beir.evaluate(ranked, qrels)
    agree = (
        abs(check_scores["mrr@10"] - mrr["10"]) < 1e-3
        and abs(check_scores["recall@100"] - recall["100"]) < 1e-3
    )
    reference = _beir_reference(args.quick, len(queries))
    table = [
        {
            "source": "EVALUATE KNOWLEDGE_BASE (agentkb, SQL)",
            "questions": row["total"],
            "found in top 100": row["total_found"],
            "hit@1": hit["1"],
            "hit@10": hit["10"],
            "recall@10": recall["10"],
            "recall@100": recall["100"],
            "mrr@10": mrr["10"],
            "ndcg@10": "",
            "avg query ms": round(row["avg_query_time"] * 1000, 1),
        },
        {
            "source": "same rankings, bench/beir.py metrics",
            "recall@100": check_scores["recall@100"],
            "mrr@10": check_scores["mrr@10"],
            "ndcg@10": check_scores["ndcg@10"],
        },
    ]
    if reference is not None:
        table.append(
            {
                "source": f"python -m bench beir, hybrid default ({reference['file']})",
                "recall@100": reference["recall@100"],
                "mrr@10": reference["mrr@10"],
                "ndcg@10": reference["ndcg@10"],
            }
        )
    print_table(
        f"EVALUATE on BEIR SciFact ({len(queries)} test queries, {len(corpus):,} documents), {beir.MODEL}, hybrid",
        table,
    )
    print(
        f"\nEVALUATE took {evaluate_s:.1f}s; its figures {'match' if agree else 'DIFFER FROM'} bench/beir.py's"
    )
    write_result(
        "evaluate",
        {
            "model": beir.MODEL,
            "dataset": "BEIR SciFact test",
            "quick": args.quick,
            "queries": len(queries),
            "documents": len(corpus),
            "top_k": TOP_K,
            "statement": f"EVALUATE KNOWLEDGE_BASE {beir.KB} USING test_table = files.{TEST_FILE}, top_k = {TOP_K}",
            "evaluate_seconds": round(evaluate_s, 2),
            "ingest_seconds": round(ingest_s, 2),
            "answer": row,
            "check": {**check_scores, "agrees": agree},
            "beir_reference": reference,
            "per_question_found_share": float(np.mean([r["doc_found"] for r in run["results"]])),
            "table": table,
        },
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
