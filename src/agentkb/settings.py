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
    """Every setting agentkb reads. Documented in docs/configuration.md (a test keeps the two in step)."""

    model_config = SettingsConfigDict(env_prefix="AGENTKB_", extra="ignore", frozen=True)

    data_dir: Path = Field(
        default=Path("~/.agentkb"),
        description="Directory for the embedded PostgreSQL (`<data_dir>/pg`) and uploaded files.",
    )
    database_url: str | None = Field(
        default=None,
        description="PostgreSQL URL (with pgvector available). Unset: a private PostgreSQL is started "
        "in `<data_dir>/pg`.",
    )
    database_read_url: str | None = Field(
        default=None,
        description="A read replica of the database (PostgreSQL URL): knowledge-base searches and listings "
        "read from it; everything else (writes, records, jobs) uses the primary. Unset: the primary.",
    )
    max_import_bytes: int = Field(
        default=16 * 1024**3,
        description="Largest knowledge-base export file accepted by `POST .../knowledge_bases/import`; "
        "larger gets 413.",
    )
    host: str = Field(default="127.0.0.1", description="Interface `agentkb serve` binds to.")
    port: int = Field(default=47334, description="Port `agentkb serve` listens on (MindsDB's HTTP port).")
    default_project: str = Field(default="mindsdb", description="Name of the project that always exists.")
    default_model: dict[str, Any] = Field(
        default_factory=lambda: dict(DEFAULT_MODEL),
        description="Model (JSON object: provider, model_name, api_key, ...) for agents created without one.",
    )
    default_embedding_model: dict[str, Any] = Field(
        default_factory=lambda: dict(DEFAULT_EMBEDDING_MODEL),
        description="Embedding model (JSON object) for knowledge bases created without one.",
    )
    default_reranking_model: dict[str, Any] = Field(
        default_factory=dict,
        description="Reranking model (JSON object: provider, model_name, api_key, ...) given to knowledge bases "
        "created without one (a model of the same provider is merged over it), unless created with "
        "`reranking_model = false`. Empty (the default): no reranking unless a knowledge base names a model.",
    )
    max_body_bytes: int = Field(
        default=64 * 1024 * 1024, description="Largest accepted request body in bytes; larger gets 413."
    )
    max_upload_bytes: int = Field(
        default=100 * 1024 * 1024,
        description="Largest file accepted by `PUT /api/files/{name}`; larger gets 413.",
    )
    max_inflated_member_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=1,
        description="Largest inflated size of one part of an uploaded office file (a DOCX/PPTX/XLSX zip member "
        "such as `word/document.xml`), as declared and as really inflated; larger gets 413 (a zip bomb).",
    )
    max_inflated_bytes: int = Field(
        default=1024 * 1024 * 1024,
        ge=1,
        description="Largest inflated size of all the parts of an uploaded office file together; larger gets 413.",
    )
    max_sheet_cells: int = Field(
        default=10_000_000,
        ge=1,
        description="Most cells (rows x columns, as the sheet declares them and as read) of an uploaded XLSX "
        "file's first sheet; more gets 413.",
    )
    parse_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="Longest an uploaded file's parse may run (in a child process, which is killed past it); "
        "longer gets 413.",
    )
    max_import_inflated_bytes: int = Field(
        default=64 * 1024**3,
        ge=1,
        description="Largest inflated size of a knowledge-base export file given to `POST "
        ".../knowledge_bases/import`; a file inflating past it gets 413 and nothing is stored.",
    )
    db_pool_size: int = Field(default=20, description="Connections kept in the PostgreSQL pool.")
    query_embedding_cache_size: int = Field(
        default=1024,
        ge=0,
        description="Query texts whose vectors each embedding configuration keeps (least recently used "
        "dropped first): a repeated search query skips the embedding call. 0: none kept.",
    )
    vector_cache_mb: int = Field(
        default=128,
        ge=0,
        description="Memory each process may hold for knowledge bases' vectors (up to 20,000 chunks and no HNSW "
        "index yet, least recently searched dropped first): an unfiltered vector search of such a KB ranks them "
        "in the process instead of an exact scan in PostgreSQL, and reads only the best rows from it. 0: every "
        "search scans in PostgreSQL.",
    )
    hnsw_ef_search: int = Field(
        default=100,
        ge=1,
        le=1000,
        description="HNSW search breadth (pgvector's `hnsw.ef_search`, 1..1000): the candidate list a vector "
        "search walks. Wider finds more of the exact nearest neighbours (recall) and takes longer; a knowledge "
        "base's `ef_search` param overrides it, and a search for more rows than this widens it to its limit.",
    )
    worker_enabled: bool = Field(
        default=True, description="Run an ingestion worker inside the API server for async inserts."
    )
    job_heartbeat_s: float = Field(
        default=5.0, description="How often a running ingestion job records it is alive."
    )
    job_stale_after_s: float = Field(
        default=30.0,
        description="A running job silent this long is taken over by another worker (or failed).",
    )
    autobatch_inserts: bool = Field(
        default=False,
        description="Run `INSERT INTO <kb> SELECT ...` as a background query (MindsDB's autobatch: batches of "
        "1000 rows by the KB's id column, answered with the query's record) when the source has that column. "
        "Off: the insert runs in the statement, as MindsDB does for pgvector storage.",
    )
    crawl_allow_private: bool = Field(
        default=False,
        description="Let the crawler fetch private and loopback addresses (off: SSRF guard). Link-local and "
        "cloud metadata addresses are refused either way.",
    )
    data_source_file_dir: Path | None = Field(
        default=None,
        description="The directory SQLite data sources must be in (symlinks and `..` resolved first); a "
        "relative `db_file` is read from it. Unset: `<data_dir>/databases`.",
    )
    data_source_allow_local: bool = Field(
        default=False,
        description="Let data sources reach unix sockets, agentkb's own PostgreSQL server and files in "
        "`<data_dir>`. Off: refused (other loopback and private TCP servers are allowed either way).",
    )
    agent_timeout_s: float = Field(
        default=120.0,
        description="Default bound on one agent run (an agent's `params.timeout` overrides it).",
    )
    username: str | None = Field(
        default=None,
        description="User name for `POST /api/login` (with `AGENTKB_PASSWORD`; setting both turns auth on).",
    )
    password: SecretStr | None = Field(
        default=None, description="Password for `POST /api/login` (with `AGENTKB_USERNAME`)."
    )
    token_ttl_s: float = Field(
        default=86400.0, gt=0, description="Lifetime of a login token, in seconds (then log in again)."
    )
    allow_no_auth: bool = Field(
        default=False,
        description="Let `agentkb serve` bind a non-loopback interface with no authentication configured.",
    )
    rate_limit_per_min: int = Field(
        default=0,
        ge=0,
        description="Requests per minute allowed to each credential (or client address); 0 turns it off.",
    )
    login_free_attempts: int = Field(
        default=5,
        ge=1,
        description="Failed logins (or invalid credentials) allowed to each user name and each client address "
        "before back-off begins: then each failure blocks further attempts for `login_backoff_s`, doubling.",
    )
    login_backoff_s: float = Field(
        default=1.0, gt=0, description="The first back-off after the free attempts are spent, in seconds."
    )
    login_backoff_max_s: float = Field(
        default=900.0, gt=0, description="The longest back-off, in seconds (the doubling stops there)."
    )
    login_window_s: float = Field(
        default=86400.0,
        gt=0,
        description="Failures are remembered until this many seconds pass without one (or a login succeeds).",
    )
    shutdown_grace_s: float = Field(
        default=10.0,
        gt=0,
        description="On SIGTERM/SIGINT, the process exits within this many seconds (a second signal: at once).",
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Browser origins allowed to call the API (CORS), comma-separated or a JSON list; `*` "
        "allows any. Empty (the default): no CORS headers are sent.",
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Host names the server answers to besides localhost and loopback addresses (a guard "
        "against DNS rebinding), comma-separated or a JSON list: exact names, `*.example.com` (its "
        "subdomains), IP networks (`10.0.0.0/8`: Host headers that are such addresses), `*` (any). Empty "
        "(the default): a server with authentication on answers to any Host, one without only to localhost "
        "and loopback addresses. `/health` and `/health/ready` answer to any Host.",
    )
    trusted_proxies: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Addresses or networks (comma-separated or a JSON list: `10.0.0.5`, `10.0.0.0/8`, `*` "
        "for any) of the reverse proxies whose `X-Forwarded-For` / `X-Forwarded-Proto` are believed: a "
        "request from one of them takes its client address (rate limit, logs) and scheme (cookies' Secure) "
        "from those headers. Empty (the default): the headers are ignored.",
    )
    secret_key: SecretStr | None = Field(
        default=None,
        description="Fernet key(s) encrypting the secrets stored in the database (provider keys, passwords); "
        "comma-separated: the first encrypts, all decrypt. Unset: the key file `secret_key_file`.",
    )
    secret_key_file: Path | None = Field(
        default=None,
        description="Key file used when `secret_key` is unset (default `<data_dir>/secret.key`, created "
        "with mode 0600 on first start).",
    )
    log_level: str = Field(default="INFO", description="Log level (DEBUG, INFO, WARNING, ERROR).")
    log_format: Literal["text", "json"] = Field(default="text", description="Log lines as text or JSON.")

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
