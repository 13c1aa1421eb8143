"""API keys and login sessions (`api_keys`, `auth_sessions`, migration 0008; a key's scope, migration
0017). Rows hold the SHA-256 of each secret, never the secret: a stolen database dump cannot be replayed as
a credential."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, Boolean, Column, DateTime, Table, Text, false, func, select, text
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.storage.schema import metadata

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("name", Text, nullable=False, unique=True),
    Column("key_hash", Text, nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("last_used_at", DateTime(timezone=True), nullable=True),
    Column("read_only", Boolean, nullable=False, server_default=false()),
    Column("projects", ARRAY(Text), nullable=True),  # NULL: every project and the global objects
)

auth_sessions = Table(
    "auth_sessions",
    metadata,
    Column("token_hash", Text, primary_key=True),
    Column("username", Text, nullable=False),
    Column("login_tag", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)


@dataclass(frozen=True, slots=True)
class ApiKeyRow:
    name: str
    created_at: datetime
    last_used_at: datetime | None
    read_only: bool = False
    projects: tuple[str, ...] | None = None  # None: not limited to projects


@dataclass(frozen=True, slots=True)
class KeyScope:
    """What a key found by its hash may do: its name, stored hash, and scope."""

    name: str
    key_hash: str
    read_only: bool
    projects: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class SessionRow:
    username: str
    login_tag: str
    expires_at: datetime


_KEY_COLUMNS = (
    api_keys.c.name,
    api_keys.c.created_at,
    api_keys.c.last_used_at,
    api_keys.c.read_only,
    api_keys.c.projects,
)


def _key_row(row: Any) -> ApiKeyRow:
    projects = tuple(row.projects) if row.projects is not None else None
    return ApiKeyRow(row.name, row.created_at, row.last_used_at, row.read_only, projects)


async def insert_key(
    conn: AsyncConnection,
    name: str,
    key_hash: str,
    *,
    read_only: bool = False,
    projects: Sequence[str] | None = None,
) -> ApiKeyRow | None:
    """Insert; None if the name is taken (the unique constraint decides, race-free)."""
    stmt = (
        insert(api_keys)
        .values(
            name=name,
            key_hash=key_hash,
            read_only=read_only,
            projects=list(projects) if projects is not None else None,
        )
        .on_conflict_do_nothing(index_elements=["name"])
        .returning(*_KEY_COLUMNS)
    )
    row = (await conn.execute(stmt)).first()
    return _key_row(row) if row else None


async def list_keys(conn: AsyncConnection) -> list[ApiKeyRow]:
    stmt = select(*_KEY_COLUMNS).order_by(api_keys.c.name)
    return [_key_row(r) for r in await conn.execute(stmt)]


async def delete_key(conn: AsyncConnection, name: str) -> bool:
    result = await conn.execute(api_keys.delete().where(api_keys.c.name == name).returning(api_keys.c.id))
    return result.first() is not None


async def any_key(conn: AsyncConnection) -> bool:
    return (await conn.scalar(select(api_keys.c.id).limit(1))) is not None


_USE_KEY = text(
    """
    WITH k AS (
        SELECT id, name, key_hash, last_used_at, read_only, projects FROM api_keys WHERE key_hash = :key_hash
    ),
    touched AS (
        UPDATE api_keys SET last_used_at = now() FROM k
        WHERE api_keys.id = k.id
          AND (k.last_used_at IS NULL OR k.last_used_at < now() - make_interval(secs => :touch_after_s))
    )
    SELECT name, key_hash, read_only, projects FROM k
    """
)


async def use_key(conn: AsyncConnection, key_hash: str, touch_after_s: float) -> KeyScope | None:
    """The key with this hash (name, stored hash, scope), or None; records the use when the last recorded
    one is older than `touch_after_s` (one write per key and interval, not one per request)."""
    row = (await conn.execute(_USE_KEY, {"key_hash": key_hash, "touch_after_s": touch_after_s})).first()
    if row is None:
        return None
    projects = tuple(row.projects) if row.projects is not None else None
    return KeyScope(row.name, row.key_hash, row.read_only, projects)


async def insert_session(
    conn: AsyncConnection, token_hash: str, username: str, login_tag: str, ttl_s: float
) -> None:
    await conn.execute(
        insert(auth_sessions).values(
            token_hash=token_hash,
            username=username,
            login_tag=login_tag,
            expires_at=func.now() + timedelta(seconds=ttl_s),
        )
    )


async def get_session(conn: AsyncConnection, token_hash: str) -> SessionRow | None:
    """The session with this token hash, unless it has expired."""
    stmt = select(auth_sessions.c.username, auth_sessions.c.login_tag, auth_sessions.c.expires_at).where(
        auth_sessions.c.token_hash == token_hash, auth_sessions.c.expires_at > func.now()
    )
    row = (await conn.execute(stmt)).first()
    return SessionRow(row.username, row.login_tag, row.expires_at) if row else None


async def delete_session(conn: AsyncConnection, token_hash: str) -> bool:
    result = await conn.execute(
        auth_sessions.delete()
        .where(auth_sessions.c.token_hash == token_hash)
        .returning(auth_sessions.c.username)
    )
    return result.first() is not None


async def delete_expired_sessions(conn: AsyncConnection) -> None:
    await conn.execute(auth_sessions.delete().where(auth_sessions.c.expires_at <= func.now()))


async def key_by_name(conn: AsyncConnection, name: str) -> KeyScope | None:
    """The API key named `name` (its stored hash and scope), or None (no such key: revoked, or never made)."""
    stmt = select(api_keys.c.name, api_keys.c.key_hash, api_keys.c.read_only, api_keys.c.projects).where(
        api_keys.c.name == name
    )
    row = (await conn.execute(stmt)).first()
    if row is None:
        return None
    projects = tuple(row.projects) if row.projects is not None else None
    return KeyScope(row.name, row.key_hash, row.read_only, projects)
