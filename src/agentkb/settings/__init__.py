"""The one typed settings object: environment (`AGENTKB_*`), an optional TOML file, then defaults. Its fields
are declared by group in `data` (storage, models, limits, search, background work, sources) and `server`
(serving, authentication, secret keys); the checks that span fields and the sources are here."""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from agentkb.settings.data import (
    DEFAULT_EMBEDDING_MODEL,
    DEFAULT_MODEL,
    DatabaseSettings,
    LimitSettings,
    ModelSettings,
    SearchSettings,
    SourceSettings,
    WorkSettings,
)
from agentkb.settings.server import AuthSettings, ServerSettings

__all__ = ["DEFAULT_EMBEDDING_MODEL", "DEFAULT_MODEL", "Settings"]


def _text_list(value: Any) -> Any:
    """A list setting given as text: a JSON list, or comma-separated values."""
    if isinstance(value, str):
        text = value.strip()
        return json.loads(text) if text.startswith("[") else text.split(",")
    return value


def _text_items(value: Any, clean: Callable[[str], str]) -> Any:
    """A list setting (`_text_list`) with each text item passed through `clean` and the empty ones dropped;
    other items, and a value that is no list, as given (the field's type then refuses them)."""
    value = _text_list(value)
    if not isinstance(value, list):
        return value
    cleaned = [clean(item) if isinstance(item, str) else item for item in value]
    return [item for item in cleaned if item != ""]


def _config_file() -> Path | None:
    value = os.environ.get("AGENTKB_CONFIG_FILE")
    return Path(value).expanduser() if value else None


# the groups last to first: pydantic lists the last base's fields first, so the fields (and docs/configuration.md's
# table) come in the order of the groups in `data` then `server`
class Settings(
    AuthSettings,
    ServerSettings,
    SourceSettings,
    WorkSettings,
    SearchSettings,
    LimitSettings,
    ModelSettings,
    DatabaseSettings,
    BaseSettings,
):
    """Every setting agentkb reads. Each description is the text of its row in docs/configuration.md's table
    (`python -m agentkb.settings_doc` writes it; a test keeps the two in step)."""

    model_config = SettingsConfigDict(env_prefix="AGENTKB_", extra="ignore", frozen=True)

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
        # "https://app.example/" and "https://app.example" are one origin
        return _text_items(value, lambda origin: origin.strip().rstrip("/"))

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _hosts(cls, value: Any) -> Any:
        value = _text_items(value, lambda host: host.strip().lower().rstrip("."))
        if isinstance(value, list):
            for pattern in value:
                wildcard = isinstance(pattern, str) and "*" in pattern and pattern != "*"
                if wildcard and (not pattern.startswith("*.") or "*" in pattern[1:]):
                    raise ValueError(f"allowed host {pattern!r}: a wildcard is `*` or `*.example.com`")
        return value

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _proxies(cls, value: Any) -> Any:
        value = _text_items(value, str.strip)
        if isinstance(value, list):
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
