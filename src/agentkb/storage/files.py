"""File rows (`files`, migration 0004): what `/api/files` lists; their bytes (`file_blobs`, migration 0011),
keyed by `sha256` so several names may share one blob, in parts of `PART_BYTES`. `lock_blob` serialises
writers and collectors of one blob (across processes and hosts)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Integer,
    LargeBinary,
    RowMapping,
    Table,
    Text,
    func,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.storage.schema import metadata

files = Table(
    "files",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("name", Text, nullable=False, unique=True),
    Column("original_name", Text, nullable=False),
    Column("content_type", Text, nullable=False),
    Column("extension", Text, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("sha256", Text, nullable=False, index=True),
    Column("row_count", BigInteger, nullable=True),
    Column("page_count", Integer, nullable=True),
    Column("columns", JSONB, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

PART_BYTES = 2**20  # one `file_blob_parts` row holds this much of a blob

file_blobs = Table(
    "file_blobs",
    metadata,
    Column("sha256", Text, primary_key=True),
    Column("size_bytes", BigInteger, nullable=False),
    Column("parts", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

file_blob_parts = Table(
    "file_blob_parts",
    metadata,
    Column("sha256", Text, ForeignKey("file_blobs.sha256", ondelete="CASCADE"), primary_key=True),
    Column("part", Integer, primary_key=True),
    Column("data", LargeBinary, nullable=False),
)


@dataclass(frozen=True, slots=True)
class FileRow:
    id: int
    name: str
    original_name: str
    content_type: str
    extension: str  # without the dot: "pdf", "csv", ...
    size_bytes: int
    sha256: str
    row_count: int | None  # tabular files
    page_count: int | None  # documents: pages, slides or sections
    columns: list[str] | None  # tabular files
    created_at: datetime


@dataclass(frozen=True, slots=True)
class NewFile:
    name: str
    original_name: str
    content_type: str
    extension: str
    size_bytes: int
    sha256: str
    row_count: int | None = None
    page_count: int | None = None
    columns: list[str] | None = None


def _row(r: RowMapping) -> FileRow:
    return FileRow(**{k: r[k] for k in FileRow.__slots__})


async def list_all(conn: AsyncConnection) -> list[FileRow]:
    rows = await conn.execute(select(files).order_by(files.c.name))
    return [_row(r) for r in rows.mappings()]


async def get(conn: AsyncConnection, name: str) -> FileRow | None:
    row = (await conn.execute(select(files).where(files.c.name == name))).mappings().first()
    return _row(row) if row else None


async def insert_new(conn: AsyncConnection, new: NewFile) -> FileRow | None:
    """Insert; None if the name is taken (the unique constraint decides, race-free)."""
    values = {k: getattr(new, k) for k in NewFile.__slots__}
    stmt = insert(files).values(**values).on_conflict_do_nothing(index_elements=["name"]).returning(*files.c)
    row = (await conn.execute(stmt)).mappings().first()
    return _row(row) if row else None


async def delete(conn: AsyncConnection, name: str) -> FileRow | None:
    """Delete by name; the deleted row, or None if there was none."""
    row = (
        (await conn.execute(files.delete().where(files.c.name == name).returning(*files.c)))
        .mappings()
        .first()
    )
    return _row(row) if row else None


async def blob_in_use(conn: AsyncConnection, sha256: str) -> bool:
    found = await conn.execute(select(files.c.id).where(files.c.sha256 == sha256).limit(1))
    return found.first() is not None


async def lock_blob(conn: AsyncConnection, sha256: str) -> None:
    """A transaction-scoped advisory lock on one blob: placing it with a new row, and removing it once no row
    uses it, never interleave (across processes too)."""
    await conn.execute(
        text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": f"file:{sha256}"}
    )


# --- blobs ----------------------------------------------------------------------------------------------


async def blob_parts(conn: AsyncConnection, sha256: str) -> int | None:
    """How many parts the stored blob has; None when it is not stored."""
    found = await conn.execute(select(file_blobs.c.parts).where(file_blobs.c.sha256 == sha256))
    return found.scalar_one_or_none()


async def insert_blob(conn: AsyncConnection, sha256: str, size_bytes: int, parts: int) -> None:
    await conn.execute(file_blobs.insert().values(sha256=sha256, size_bytes=size_bytes, parts=parts))


async def insert_part(conn: AsyncConnection, sha256: str, part: int, data: bytes) -> None:
    await conn.execute(file_blob_parts.insert().values(sha256=sha256, part=part, data=data))


async def read_part(conn: AsyncConnection, sha256: str, part: int) -> bytes | None:
    """One part's bytes; None when the blob is gone."""
    found = await conn.execute(
        select(file_blob_parts.c.data).where(
            file_blob_parts.c.sha256 == sha256, file_blob_parts.c.part == part
        )
    )
    data = found.scalar_one_or_none()
    return None if data is None else bytes(data)


async def delete_blob(conn: AsyncConnection, sha256: str) -> None:
    """The blob and its parts (by the foreign key's cascade)."""
    await conn.execute(file_blobs.delete().where(file_blobs.c.sha256 == sha256))


async def referenced_blobs(conn: AsyncConnection) -> set[str]:
    """The SHA-256s file rows name."""
    return set((await conn.execute(select(files.c.sha256).distinct())).scalars())
