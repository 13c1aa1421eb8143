"""The settings of data: where it lives, the default models, size limits, search memory, background work, and
where ingestion may reach. Field groups of `agentkb.settings.Settings` (each description is its row in
docs/configuration.md's table)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

DEFAULT_MODEL: dict[str, Any] = {"provider": "extractive", "model_name": "extractive"}
DEFAULT_EMBEDDING_MODEL: dict[str, Any] = {"provider": "local", "model_name": "all-MiniLM-L6-v2"}


class DatabaseSettings(BaseModel):
    """Where agentkb keeps its data: the data directory, or the PostgreSQL it is given (and its read replica
    and pooler), and the connection pool."""

    data_dir: Path = Field(
        default=Path("~/.agentkb"),
        description=(
            "Directory for the embedded PostgreSQL (`<data_dir>/pg`), the key file and uploads in progress (their bytes are "
            "stored in PostgreSQL)."
        ),
    )
    database_url: str | None = Field(
        default=None,
        description=(
            "A PostgreSQL URL (`postgresql://user:pass@host:5432/db`) whose server has the pgvector extension available; "
            "agentkb runs `CREATE EXTENSION IF NOT EXISTS vector` and its migrations there. Unset: a private PostgreSQL is "
            "started in `<data_dir>/pg` ([the embedded PostgreSQL](#the-embedded-postgresql))."
        ),
    )
    database_read_url: str | None = Field(
        default=None,
        description=(
            "A read replica of that database (a PostgreSQL URL, e.g. a streaming standby, or a role that may only read): "
            "knowledge-base searches and `GET …/knowledge_bases` listings read there; everything else uses "
            "`AGENTKB_DATABASE_URL` ([read replica](#the-read-replica)). Unset: everything on the primary."
        ),
    )
    database_direct_url: str | None = Field(
        default=None,
        description=(
            "The same database reached directly (or through a *session*-mode pool), for the work that holds a session: "
            "job leases, scheduled jobs' leases, vector-index merges and migrations. Needed when "
            "`AGENTKB_DATABASE_TRANSACTION_POOLED` is on ([PgBouncer](scaling.md#pgbouncer)); unset: all of it on "
            "`AGENTKB_DATABASE_URL`."
        ),
    )
    database_transaction_pooled: bool = Field(
        default=False,
        description=(
            "`AGENTKB_DATABASE_URL` (and the read URL) go through a *transaction*-mode pooler such as PgBouncer: no "
            "server-side prepared statements (PgBouncer < 1.21 cannot carry them), no session state relied on, and the "
            "sessions' work on `AGENTKB_DATABASE_DIRECT_URL`, which must then be set (start-up is refused without it)."
        ),
    )
    read_replica_max_lag_s: float = Field(
        default=30.0,
        gt=0,
        description=(
            "A read replica further behind the primary than this (seconds) is bypassed: its reads go to the primary (a "
            "log line, `agentkb_read_replica_usable` 0) until it catches up; so is one that does not answer "
            "([read replica](#the-read-replica))."
        ),
    )
    read_your_writes: bool = Field(
        default=False,
        description=(
            "Every request reads its process's own writes: a read the replica has not replayed this process's last "
            "write for goes to the primary. Off: only requests with `X-Agentkb-Read-Your-Writes: true` "
            "([read replica](#the-read-replica))."
        ),
    )
    db_pool_size: int = Field(
        default=20, description="PostgreSQL connections kept in the pool (as many again may overflow)."
    )


class ModelSettings(BaseModel):
    """The project that always exists and the models agents and knowledge bases get when they name none."""

    default_project: str = Field(
        default="mindsdb", description="Name of the project that always exists (MindsDB's default project)."
    )
    default_model: dict[str, Any] = Field(
        default_factory=lambda: dict(DEFAULT_MODEL),
        description=(
            "Model (JSON object: provider, model_name, api_key, ...) for agents created without one. `extractive` answers from "
            "retrieved passages and needs no key."
        ),
    )
    default_embedding_model: dict[str, Any] = Field(
        default_factory=lambda: dict(DEFAULT_EMBEDDING_MODEL),
        description=(
            "Embedder (JSON object) for knowledge bases created without one. A KB's `embedding_model` with the same provider is"
            " merged over it (as MindsDB does); another provider replaces it."
        ),
    )
    default_reranking_model: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            'Reranking model (JSON object, e.g. `{"provider": "openai", "model_name": "gpt-4o", "api_key": "…"}`) given to '
            "knowledge bases created without one, as MindsDB's `default_reranking_model`: a KB's `reranking_model` with the "
            "same provider (or none) is merged over it, another provider replaces it, and `reranking_model = false` creates the"
            " KB without reranking. Applied when a KB is created: the KB's record names the model it got. Empty: no reranking "
            "unless a KB names a model."
        ),
    )


class LimitSettings(BaseModel):
    """How large a request, an upload, an import or a parsed file may be, and how long parsing may take."""

    max_body_bytes: int = Field(
        default=64 * 1024 * 1024, description="Largest accepted request body in bytes; a larger one gets 413."
    )
    max_upload_bytes: int = Field(
        default=100 * 1024 * 1024,
        description="Largest file accepted by `PUT /api/files/{name}`; a larger one gets 413.",
    )
    max_inflated_member_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=1,
        description=(
            "Largest inflated size of one part of an uploaded DOCX, PPTX or XLSX file (a zip member such as "
            "`word/document.xml`), checked as the zip declares it and again as it really inflates (a lying header gets no "
            "further); larger gets 413 naming the part. (A `.zip` / `.tar.gz` upload's one file is held to "
            "`AGENTKB_MAX_UPLOAD_BYTES`.)"
        ),
    )
    max_inflated_bytes: int = Field(
        default=1024 * 1024 * 1024,
        ge=1,
        description="Largest inflated size of all the parts of an uploaded office file together; larger gets 413.",
    )
    max_sheet_cells: int = Field(
        default=10_000_000,
        ge=1,
        description=(
            "Most cells of an uploaded XLSX file's first sheet (rows x columns, as its dimension declares them and as its rows "
            "are read); more gets 413."
        ),
    )
    parse_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description=(
            "Longest an uploaded file's parse may run, in seconds: each parse runs in a child process (forked from a fork "
            "server that has the parsers loaded), which is killed past this; the upload gets 413 naming the limit."
        ),
    )
    max_import_bytes: int = Field(
        default=16 * 1024**3,
        description=(
            "Largest knowledge-base export file accepted by `POST /api/projects/{p}/knowledge_bases/import` (the upload is "
            "spooled to a temporary file, not held in memory); a larger one gets 413."
        ),
    )
    max_import_inflated_bytes: int = Field(
        default=64 * 1024**3,
        ge=1,
        description=(
            "Largest inflated size of a knowledge-base export file given to the import (each record is also at most 64 MiB); a "
            "file that inflates past it (a gzip bomb) gets 413 and nothing is stored."
        ),
    )


class SearchSettings(BaseModel):
    """What searches keep in memory and how widely they walk the HNSW index."""

    query_embedding_cache_size: int = Field(
        default=1024,
        ge=0,
        description=(
            "Query texts whose vectors each embedding configuration keeps in the process (least recently used dropped first): a"
            " repeated search query (SQL, HTTP, an agent's tool) skips the embedding call. 0: none kept."
        ),
    )
    vector_cache_mb: int = Field(
        default=128,
        ge=0,
        description=(
            "Memory each process may hold for knowledge bases' vectors (KBs of up to 20,000 chunks with no HNSW index, least "
            "recently searched dropped first): an unfiltered vector search of such a KB ranks them in the process instead of an"
            " exact scan in PostgreSQL, and reads only the best rows from it ([the vector cache](#the-vector-cache)). 0: every "
            "search in PostgreSQL."
        ),
    )
    hnsw_ef_search: int = Field(
        default=100,
        ge=1,
        le=1000,
        description=(
            "HNSW search breadth, pgvector's `hnsw.ef_search` (1..1000): the candidate list a vector search walks. Wider finds "
            "more of the exact nearest neighbours and takes longer (figures at 100,000 chunks: "
            "[benchmarks.md](benchmarks.md#search100k)). A knowledge base's `ef_search` param overrides it; a search asking for"
            " more rows than the list holds widens it to that many for its statement. Out of range: the server does not start."
        ),
    )


class WorkSettings(BaseModel):
    """Background work: the ingestion worker, scheduled jobs, insert batching, and agent runs' time limit."""

    worker_enabled: bool = Field(
        default=True,
        description=(
            "Run an ingestion worker inside the API server for async inserts (`?async=true`). Turn it off when separate "
            "`agentkb worker` processes drain the queue."
        ),
    )
    job_heartbeat_s: float = Field(
        default=5.0,
        description="How often (seconds) a running ingestion job records that it is alive (and checks for a cancel request).",
    )
    job_stale_after_s: float = Field(
        default=30.0,
        description=(
            "A running async job silent this long (seconds) is taken over by another worker and re-run; a silent synchronous "
            "one is marked failed."
        ),
    )
    scheduler_enabled: bool = Field(
        default=True,
        description=(
            "Run the scheduler of jobs (`CREATE JOB`, [jobs](jobs.md)) in this process (`serve` and `worker`); any number "
            "of processes may: each tick runs once."
        ),
    )
    scheduler_poll_s: float = Field(
        default=1.0, gt=0, description="The scheduler looks for due jobs at least this often (seconds)."
    )
    job_run_timeout_s: float = Field(
        default=3600.0,
        gt=0,
        description="A scheduled job's run still going after this long (seconds) is stopped and fails.",
    )
    job_run_concurrency: int = Field(
        default=4, ge=1, description="Scheduled job runs one process runs at the same time, at most."
    )
    autobatch_inserts: bool = Field(
        default=False,
        description=(
            "MindsDB's autobatch: `INSERT INTO <kb> SELECT …` (no `batch_size`) whose source has the KB's id column "
            "(`id_column`, else `id`) runs as a background query in batches of 1000 rows ordered by that column, and answers at"
            " once with the query's record (`ID`, …; follow it in `information_schema.queries`). Off (as MindsDB with pgvector "
            "storage): the insert completes within the statement. `USING batch_size = n` always runs in the background."
        ),
    )
    agent_timeout_s: float = Field(
        default=120.0,
        description="Default bound on one agent run, in seconds; an agent's `params.timeout` overrides it.",
    )


class SourceSettings(BaseModel):
    """Where ingestion and data sources may reach: private addresses for crawls, local database files."""

    crawl_allow_private: bool = Field(
        default=False,
        description=(
            "Let the crawler fetch private and loopback addresses. Off, such targets are refused (SSRF guard). Link-local and "
            "cloud metadata addresses are refused either way ([destinations](api.md#where-the-server-connects))."
        ),
    )
    data_source_file_dir: Path | None = Field(
        default=None,
        json_schema_extra={"default_shown": "<data_dir>/databases"},
        description=(
            "The directory SQLite data sources must be in; a relative `db_file` is read from it. A path outside it (after "
            "symlinks and `..` are resolved) is refused with 400. Set it to `/` to allow files anywhere (agentkb's own data "
            "directory still needs `AGENTKB_DATA_SOURCE_ALLOW_LOCAL`)."
        ),
    )
    data_source_allow_local: bool = Field(
        default=False,
        description=(
            "Let data sources reach unix sockets (a `host` starting with `/` or `@`), agentkb's own PostgreSQL server (the "
            "`AGENTKB_DATABASE_URL` / read replica host and port; the embedded one listens on a socket only) and files in "
            "`<data_dir>`. Off: refused with 400. Other loopback and private TCP servers (a local MySQL) are allowed either "
            "way."
        ),
    )
