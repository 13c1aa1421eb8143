"""The settings of serving: address, shutdown, CORS, Host names, proxies, logs, and who may call. Field groups
of `agentkb.settings.Settings` (each description is its row in docs/configuration.md's table)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import NoDecode


class ServerSettings(BaseModel):
    """How `agentkb serve` listens and answers: address, shutdown, CORS, Host names, proxies, logs."""

    host: str = Field(default="127.0.0.1", description="Interface `agentkb serve` binds to.")
    port: int = Field(default=47334, description="Port `agentkb serve` listens on (MindsDB's HTTP port).")
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
    log_level: str = Field(default="INFO", description="`DEBUG`, `INFO`, `WARNING` or `ERROR`.")
    log_format: Literal["text", "json"] = Field(
        default="text",
        description=(
            "`text` or `json` (one JSON object per line, with request id, path, status, duration and client address for each "
            "request)."
        ),
    )


class AuthSettings(BaseModel):
    """Who may call: the login, API keys' throttling, and the keys that seal stored secrets."""

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
