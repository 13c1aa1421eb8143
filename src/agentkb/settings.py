"""The one typed settings object: environment (`AGENTKB_*`), an optional TOML file, then defaults."""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

DEFAULT_MODEL: dict[str, Any] = {"provider": "extractive", "model_name": "extractive"}
DEFAULT_EMBEDDING_MODEL: dict[str, Any] = {"provider": "local", "model_name": "all-MiniLM-L6-v2"}


def _text_list(value: Any) -> Any:
    """A list setting given as text: a JSON list, or comma-separated values."""
    if isinstance(value, str):
        text = value.strip()
        return json.loads(text) if text.startswith("[") else text.split(",")
    return value


def _config_file() -> Path | None:
    value = os.environ.get("AGENTKB_CONFIG_FILE")
    return Path(value).expanduser() if value else None


class Settings(BaseSettings):
    """Every setting agentkb reads. Each description is the text of its row in docs/configuration.md's table
    (`python -m agentkb.settings_doc` writes it; a test keeps the two in step)."""

    model_config = SettingsConfigDict(env_prefix="AGENTKB_", extra="ignore", frozen=True)

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
    max_import_bytes: int = Field(
        default=16 * 1024**3,
        description=(
            "Largest knowledge-base export file accepted by `POST /api/projects/{p}/knowledge_bases/import` (the upload is "
            "spooled to a temporary file, not held in memory); a larger one gets 413."
        ),
    )
    host: str = Field(default="127.0.0.1", description="Interface `agentkb serve` binds to.")
    port: int = Field(default=47334, description="Port `agentkb serve` listens on (MindsDB's HTTP port).")
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
    max_import_inflated_bytes: int = Field(
        default=64 * 1024**3,
        ge=1,
        description=(
            "Largest inflated size of a knowledge-base export file given to the import (each record is also at most 64 MiB); a "
            "file that inflates past it (a gzip bomb) gets 413 and nothing is stored."
        ),
    )
    db_pool_size: int = Field(
        default=20, description="PostgreSQL connections kept in the pool (as many again may overflow)."
    )
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
    agent_timeout_s: float = Field(
        default=120.0,
        description="Default bound on one agent run, in seconds; an agent's `params.timeout` overrides it.",
    )
    username: str | None = Field(
        default=None,
        description=(
            "User name accepted by `POST /api/login` (and so by `mindsdb_sdk.connect(url, login=..., password=...)`). Setting "
            "it with `AGENTKB_PASSWORD` turns authentication on. Set both or neither; an empty value counts as unset."
        ),
    )
    password: SecretStr | None = Field(
        default=None,
        description=(
            "Password for `POST /api/login`. Compared in constant time; never logged nor stored (a login token's row keeps an "
            "HMAC of the login keyed by the token, so changing the user name or password ends every session made with the old "
            "one). Guessing is slowed by the [login throttle](#the-login-throttle); still, use a long passphrase."
        ),
    )
    token_ttl_s: float = Field(
        default=86400.0,
        gt=0,
        description=(
            "Lifetime of a login token, in seconds, from the login. Then requests with it get 401 and clients log in again "
            "(mindsdb_sdk does so by itself)."
        ),
    )
    allow_no_auth: bool = Field(
        default=False,
        description=(
            "Let `agentkb serve` bind a non-loopback `--host` while authentication is off (no login, no API key); also the "
            "`--allow-no-auth` flag. Without it such a start is refused with exit status 2 ([serving without "
            "authentication](#serving-without-authentication))."
        ),
    )
    rate_limit_per_min: int = Field(
        default=0,
        ge=0,
        description=(
            "Requests allowed per minute to each credential (a login's user or an API key), or, for the public routes "
            "(`/api/login`, `/api/status`, the docs) and for every request while auth is off, to each client address; more get "
            "429 problem+json with `Retry-After` (seconds). A moving window kept in each process's memory: N API processes "
            "allow up to N times the limit. `/health` is never limited. 0: off."
        ),
    )
    login_free_attempts: int = Field(
        default=5,
        ge=1,
        description=(
            "The [login throttle](#the-login-throttle), always on: failed logins and requests with an invalid token or API key "
            "allowed to each user name and each client address; then each further failure blocks that subject for "
            "`AGENTKB_LOGIN_BACKOFF_S`, doubling with every failure up to `AGENTKB_LOGIN_BACKOFF_MAX_S`, and a blocked login "
            "gets 429 problem+json with `Retry-After`."
        ),
    )
    login_backoff_s: float = Field(
        default=1.0,
        gt=0,
        description="The first block after the free attempts, in seconds; each further failure doubles it.",
    )
    login_backoff_max_s: float = Field(default=900.0, gt=0, description="The longest block, in seconds.")
    login_window_s: float = Field(
        default=86400.0,
        gt=0,
        description=(
            "A subject's failures are forgotten once this long (seconds) passes without one (its row is then deleted). Keep it "
            "well above `AGENTKB_LOGIN_BACKOFF_MAX_S`: waiting out the window must not pay better than the longest back-off."
        ),
    )
    shutdown_grace_s: float = Field(
        default=10.0,
        gt=0,
        description=(
            "On SIGTERM/SIGINT, `agentkb serve` and `agentkb worker` exit within this many seconds; a second signal exits at "
            "once. What ends when: [Probes and shutdown](#probes-and-shutdown)."
        ),
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description=(
            "Browser origins allowed to call the API (CORS), e.g. `https://app.example,http://localhost:3000` (or a JSON list);"
            " `*` allows any origin. Empty: CORS is off and no `Access-Control-*` headers are sent, so browsers refuse "
            "cross-origin calls. Credentials (cookies) are never allowed."
        ),
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description=(
            "Host names the server answers to besides `localhost` and loopback addresses (127.0.0.0/8, `[::1]`, any port), "
            "which it always answers: exact names (`api.example.com`), `*.example.com` (its subdomains), IP networks "
            '(`10.0.0.0/8`: a `Host` that is such an address), or `*` (any). Any other `Host` gets 400 problem+json "Invalid '
            'host header" (a guard against DNS rebinding). Empty: a server without authentication answers to the loopback names'
            " only, one with authentication to any `Host` ([allowed hosts](#allowed-hosts))."
        ),
    )
    trusted_proxies: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description=(
            "The reverse proxies (IP addresses or networks, e.g. `10.0.0.5,10.1.0.0/16`; `*` for any peer) whose "
            "`X-Forwarded-For` and `X-Forwarded-Proto` are believed: a request whose direct peer is one of them takes its "
            "client address and scheme from those headers ([trusted proxies](#trusted-proxies)). Empty: the headers are "
            "ignored, from any peer."
        ),
    )
    secret_key: SecretStr | None = Field(
        default=None,
        description=(
            "The key that encrypts the secrets stored in the database: 44 characters of URL-safe base64 (a Fernet key; "
            "[Secrets](#secrets) says how to make one). Several keys, comma-separated: the first encrypts, all decrypt (for a "
            "rotation). Unset: the key file below."
        ),
    )
    secret_key_file: Path | None = Field(
        default=None,
        json_schema_extra={"default_shown": "<data_dir>/secret.key"},
        description=(
            "Where the key lives when `AGENTKB_SECRET_KEY` is unset. Missing at start-up, it is generated with mode 0600 (its "
            "directory, if missing, is created 0700); a key file others can read is reported in the log."
        ),
    )
    allow_unknown_secret_keys: bool = Field(
        default=False,
        description=(
            "Start even when the database holds secrets encrypted with keys this process lacks (they stay unusable: each use "
            "is a clear error). Off: such a start is refused, naming the key ids ([Secrets](#secrets)). For a key that is "
            "lost for good: start with this on, then set those secrets again."
        ),
    )
    log_level: str = Field(default="INFO", description="`DEBUG`, `INFO`, `WARNING` or `ERROR`.")
    log_format: Literal["text", "json"] = Field(
        default="text",
        description=(
            "`text` or `json` (one JSON object per line, with request id, path, status, duration and client address for each "
            "request)."
        ),
    )

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator("secret_key_file", "data_source_file_dir")
    @classmethod
    def _expand_optional(cls, value: Path | None) -> Path | None:
        return value.expanduser().resolve() if value is not None else None

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _origins(cls, value: Any) -> Any:
        value = _text_list(value)
        if isinstance(value, list):  # "https://app.example/" and "https://app.example" are one origin
            value = [o.strip().rstrip("/") if isinstance(o, str) else o for o in value]
            return [o for o in value if o != ""]
        return value

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _hosts(cls, value: Any) -> Any:
        value = _text_list(value)
        if isinstance(value, list):
            value = [h.strip().lower().rstrip(".") if isinstance(h, str) else h for h in value]
            value = [h for h in value if h != ""]
            for pattern in value:
                wildcard = isinstance(pattern, str) and "*" in pattern and pattern != "*"
                if wildcard and (not pattern.startswith("*.") or "*" in pattern[1:]):
                    raise ValueError(f"allowed host {pattern!r}: a wildcard is `*` or `*.example.com`")
        return value

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _proxies(cls, value: Any) -> Any:
        value = _text_list(value)
        if isinstance(value, list):
            value = [p.strip() if isinstance(p, str) else p for p in value]
            value = [p for p in value if p != ""]
            for proxy in value:
                if proxy == "*" or not isinstance(proxy, str):
                    continue
                try:
                    ipaddress.ip_network(proxy, strict=False)
                except ValueError:
                    raise ValueError(
                        f"trusted proxy {proxy!r} is not an IP address or network (e.g. 10.0.0.5, "
                        "10.0.0.0/8) or `*`"
                    ) from None
        return value

    @field_validator("default_project")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()

    @field_validator("username", "password", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if value == "" else value

    @model_validator(mode="after")
    def _direct_url(self) -> Settings:
        if self.database_transaction_pooled and not self.database_direct_url:
            raise ValueError(
                "AGENTKB_DATABASE_TRANSACTION_POOLED needs AGENTKB_DATABASE_DIRECT_URL: job leases, scheduled jobs' "
                "leases and vector-index merges hold session-level advisory locks, which a transaction-mode pooler "
                "cannot keep; set it to the database itself (or a session-mode pool)"
            )
        if self.database_direct_url and not self.database_url:
            raise ValueError("AGENTKB_DATABASE_DIRECT_URL is set but AGENTKB_DATABASE_URL is not")
        return self

    @model_validator(mode="after")
    def _login_pair(self) -> Settings:
        if (self.username is None) != (self.password is None):
            raise ValueError("set both AGENTKB_USERNAME and AGENTKB_PASSWORD, or neither")
        return self

    @property
    def pg_dir(self) -> Path:
        return self.data_dir / "pg"

    @property
    def data_source_dir(self) -> Path:
        """Where SQLite data sources must be (`data_source_file_dir`, default `<data_dir>/databases`)."""
        return self.data_source_file_dir or self.data_dir / "databases"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = _config_file()
        if path is not None:
            if not path.is_file():
                raise ValueError(f"AGENTKB_CONFIG_FILE={path} does not exist")
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)
