"""Prometheus metrics (prometheus-client): every metric agentkb exports, and their exposition.

A leaf module: the layers that do the work (the HTTP middleware, the embedder base class, the agent
provider registry, the ingest pipeline, the search service) record into the metrics defined here;
`GET /metrics` renders them. docs/operations.md#metrics lists them with their labels.

Several processes (`serve --workers N`, gunicorn, one `serve` and several `worker`s on a host): each
process counts for itself. Either scrape each process on its own port (the simplest), or set
`PROMETHEUS_MULTIPROC_DIR` to an empty directory shared by the processes of one host before they start:
prometheus-client then keeps the values in memory-mapped files there and `render()` sums them
(gauges: per live process, labelled `pid`, or the most recent value, as each gauge declares).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_LATEST
# model calls and requests: 5 ms .. 2 min
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
UNMATCHED_ROUTE = "<unmatched>"

# HTTP (agentkb.api.metrics.RequestMetrics): the route is the path template, never the raw path
http_requests = Counter(
    "agentkb_http_requests",
    "HTTP requests answered, by method, route template and status code.",
    ["method", "route", "status"],
)
http_request_duration = Histogram(
    "agentkb_http_request_duration_seconds",
    "Time from the request's arrival to the end of its response (streams: to their last event).",
    ["method", "route", "status"],
    buckets=LATENCY_BUCKETS,
)
http_requests_in_progress = Gauge(
    "agentkb_http_requests_in_progress",
    "HTTP requests being answered now.",
    multiprocess_mode="livesum",
)

# login throttling (agentkb.service.login_throttle)
login_failures = Counter(
    "agentkb_login_failures",
    "Failed logins (reason `password`: a wrong user name or password) and invalid credentials (reason "
    "`credential`: an unknown, expired or revoked token or API key), each counted toward the throttle.",
    ["reason"],
)
login_throttled = Counter(
    "agentkb_login_throttled",
    "Requests refused (429) by the login throttle, by kind: `login` (POST /api/login, the console's form) "
    "or `credential` (a request carrying a token or API key from a blocked client address).",
    ["kind"],
)

# ingestion (agentkb.ingest.pipeline): work done per written batch (a transaction that later rolls back
# has still done it)
ingest_documents = Counter("agentkb_ingest_documents", "Documents (rows, files, pages) ingested.")
ingest_chunks_written = Counter("agentkb_ingest_chunks_written", "Chunks written to chunk tables.")
ingest_chunks_unchanged = Counter(
    "agentkb_ingest_chunks_unchanged", "Chunks found identical to the stored ones (not rewritten)."
)
ingest_chunks_deleted = Counter(
    "agentkb_ingest_chunks_deleted", "Stored chunks removed because their document no longer has them."
)
ingest_embeddings = Counter("agentkb_ingest_embeddings", "Chunk texts sent to the embedding model.")
ingest_vectors_reused = Counter(
    "agentkb_ingest_vectors_reused", "Chunks written with a stored vector of identical text (not embedded)."
)
jobs_finished = Counter(
    "agentkb_jobs_finished", "Ingestion jobs this process ran to an end, by final state.", ["state"]
)
jobs = Gauge(
    "agentkb_jobs",
    "Ingestion jobs in the database by state (read at scrape time).",
    ["state"],
    multiprocess_mode="mostrecent",
)

# background merges of chunk tables' deltas into their HNSW indexes (agentkb.service.ingest.vector_merge)
BUILD_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
vector_index_merges = Counter(
    "agentkb_vector_index_merges",
    "Merges of a chunk table's delta (rows written since its HNSW index was built) into the index, by outcome: "
    "rebuilt (the index built again over every row), merged (the delta added in batches) or failed.",
    ["outcome"],
)
vector_index_merge_duration = Histogram(
    "agentkb_vector_index_merge_seconds",
    "How long merges that changed an index took, by outcome: rebuilt or merged.",
    ["outcome"],
    buckets=BUILD_BUCKETS,
)
vector_index_merges_pending = Gauge(
    "agentkb_vector_index_merges_pending",
    "Chunk tables whose merge this process has scheduled (waiting for their inserts to settle) or is running "
    "(read at scrape time).",
    multiprocess_mode="livesum",
)

# scheduled SQL jobs, MindsDB's JOBS (agentkb.service.scheduler)
sql_job_runs = Counter(
    "agentkb_sql_job_runs",
    "Runs of scheduled jobs this process ended, by state: succeeded, failed, skipped (the job's IF found "
    "nothing) or handed_back (the server stopped during the run).",
    ["state"],
)
sql_job_lag = Histogram(
    "agentkb_sql_job_lag_seconds",
    "How late each run started: from the tick it serves to its start.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0),
)
sql_job_behind = Gauge(
    "agentkb_sql_jobs_behind_seconds",
    "How far the most overdue job not yet started is behind its schedule (0: none; read at scrape time).",
    multiprocess_mode="mostrecent",
)

# model calls (agentkb.kb.embedders.base, agentkb.agents.providers.base)
embedding_requests = Histogram(
    "agentkb_embedding_request_duration_seconds",
    "Embedding model calls (one batch of texts each), by provider.",
    ["provider"],
    buckets=LATENCY_BUCKETS,
)
embedding_texts = Counter("agentkb_embedding_texts", "Texts embedded, by provider.", ["provider"])
query_embedding_cache_hits = Counter(
    "agentkb_query_embedding_cache_hits",
    "Search queries whose vector came from the embedder's cache of recent queries, by provider.",
    ["provider"],
)
embedding_errors = Counter("agentkb_embedding_errors", "Embedding model calls that failed.", ["provider"])
llm_requests = Histogram(
    "agentkb_llm_request_duration_seconds",
    "Language-model requests (one per agent step), by provider.",
    ["provider"],
    buckets=LATENCY_BUCKETS,
)
llm_errors = Counter("agentkb_llm_errors", "Language-model requests that failed, by provider.", ["provider"])

# search (agentkb.service.retrieval.search)
search_duration = Histogram(
    "agentkb_search_duration_seconds",
    "Knowledge-base searches (HTTP, SQL and the agents' kb_query_tool), by mode: vector, hybrid or "
    "metadata (no query text), with `+rerank` when reranked.",
    ["mode"],
    buckets=LATENCY_BUCKETS,
)
bm25_index_builds = Counter(
    "agentkb_bm25_index_builds",
    "BM25 indexes built (a KB's first hybrid search, then after each write of its chunks; not after a change "
    "of its settings).",
)
search_in_process = Counter(
    "agentkb_search_in_process_rankings",
    "Vector searches ranked among a KB's vectors held in the process (AGENTKB_VECTOR_CACHE_MB), by outcome: "
    "answered, stale (the KB had changed since they were loaded: searched again in PostgreSQL), or indexed "
    "(its table's HNSW index had been built since: the index answered, and the vectors were dropped).",
    ["outcome"],
)

# the connection pool (agentkb.service.metrics, at scrape time)
db_pool_connections = Gauge(
    "agentkb_db_pool_connections",
    "This process's PostgreSQL connections by state: checked_out (in use) or idle (in the pool).",
    ["state"],
    multiprocess_mode="livesum",
)
db_pool_size = Gauge(
    "agentkb_db_pool_size",
    "The pool's size plus its allowed overflow: the most connections one process opens.",
    multiprocess_mode="livesum",
)


# the read replica (agentkb.storage.read_routing)
read_replica_usable = Gauge(
    "agentkb_read_replica_usable",
    "1 while the read replica (AGENTKB_DATABASE_READ_URL) takes the reads meant for it; 0 while it is bypassed "
    "(unreachable, or lagging past AGENTKB_READ_REPLICA_MAX_LAG_S) and they go to the primary.",
    multiprocess_mode="livemax",
)
read_replica_lag = Gauge(
    "agentkb_read_replica_lag_seconds",
    "How far the read replica's replay is behind the primary, as this process last measured it.",
    multiprocess_mode="livemax",
)
read_replica_bypassed = Counter(
    "agentkb_read_replica_bypassed",
    "Reads meant for the replica that went to the primary, by reason: lagging, unreachable, "
    "read_your_writes (the replica had not replayed this process's last write yet) or failed (the replica "
    "refused the read: connection lost, a table it has not replayed yet, a conflict with recovery).",
    ["reason"],
)


@contextmanager
def timed(histogram: Histogram, errors: Counter | None, label: str) -> Iterator[None]:
    """Observe the block's duration in `histogram{label}`; count `errors{label}` when it raises (a
    cancellation is not an error)."""
    started = time.perf_counter()
    try:
        yield
    except Exception:
        if errors is not None:
            errors.labels(label).inc()
        raise
    finally:
        histogram.labels(label).observe(time.perf_counter() - started)


def registry() -> CollectorRegistry:
    """What `/metrics` renders: this process's registry, or every process's values in multiprocess mode."""
    if os.environ.get(MULTIPROCESS_ENV):
        from prometheus_client import multiprocess

        combined = CollectorRegistry()
        multiprocess.MultiProcessCollector(combined)  # type: ignore[no-untyped-call]
        return combined
    return REGISTRY


def serve_http(port: int, addr: str = "0.0.0.0") -> None:
    """Serve `render()` on `port` from a daemon thread (`agentkb worker --metrics-port`, which has no API)."""
    from prometheus_client import start_http_server

    start_http_server(port, addr=addr, registry=registry())


def render() -> bytes:
    """The text exposition format."""
    return generate_latest(registry())
