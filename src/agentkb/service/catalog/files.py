"""Uploaded files (`/api/files`), MindsDB's `files` database: names without extension, lower-cased.

Content is stored once per sha256 in PostgreSQL (`storage.files`: `file_blobs`, in parts of 1 MiB), so every
process on every host sharing the database reads it: two names with the same bytes share one blob, removed with
its last name. Uploads are streamed to `<root>/tmp`, this host's scratch directory (counted, hashed, 413 past
`max_bytes`), parsed there (in a child process with a time budget, within `ParseLimits`: `ingest.files.isolated`)
to validate them and count rows or pages, then copied into the database in the
transaction that inserts the file's row. A read copies the blob back to a temp file to parse it (recent small
files stay parsed in memory, keyed by content, so never stale).

Older versions kept blobs on disk under `<root>/<sha256[:2]>/<sha256>`: `import_local_blobs()` (at start) and a
read that finds no blob in the database move such a file into the database.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import mimetypes
import os
import tempfile
import time
from collections import OrderedDict
from collections.abc import AsyncIterable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.errors import BadRequest, NotFound, PayloadTooLarge
from agentkb.ingest.files.archive import archive_kind as archive_kind  # for the HTTP layer
from agentkb.ingest.files.archive import unpack_single
from agentkb.ingest.files.bounds import ParseLimits
from agentkb.ingest.files.detect import detect_extension
from agentkb.ingest.files.isolated import parse_isolated
from agentkb.ingest.files.parse import SUPPORTED, ParsedFile
from agentkb.ingest.files.tables import Tabular
from agentkb.service.platform import access
from agentkb.storage import files as repo
from agentkb.storage.db import Database
from agentkb.storage.files import PART_BYTES, FileRow, NewFile
from agentkb.validation import check_name, check_storable

DEFAULT_MAX_BYTES = 100 * 2**20
FLUSH_BYTES = 2**20  # written to disk in pieces of about this size
CACHE_ENTRIES = 8  # parsed files kept by `open_parsed`...
CACHE_MAX_FILE_BYTES = 2**24  # ...when their file is at most this large
STALE_UPLOAD_S = 3600
log = logging.getLogger("agentkb.files")


def file_exists(name: str) -> BadRequest:
    return BadRequest(f"File with name '{name}' already exists", title="File already exists")


def file_not_found(name: str) -> NotFound:
    return NotFound(f"File with name {name} does not exist", title="File not found")


def check_file_name(name: object) -> str:
    """MindsDB's rules: no extension (400 "File name cannot contain extension."), then our identifier rules."""
    if isinstance(name, str) and "." in name:
        raise BadRequest("File name cannot contain extension.", title="Error")
    return check_name(name, "name").lower()


@dataclass(frozen=True, slots=True)
class StagedBlob:
    """A received upload in a temp file, not yet stored."""

    path: Path
    size: int
    sha256: str


class BlobWriter:
    """Receives one upload: counts, hashes and spools it to a temp file; 413 once it passes `max_bytes`."""

    def __init__(self, tmp_dir: Path, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._hash = hashlib.sha256()
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._file = tempfile.NamedTemporaryFile(dir=tmp_dir, prefix="upload-", delete=False)  # noqa: SIM115
        self.path = Path(self._file.name)

    async def write(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.max_bytes:
            self.discard()
            raise PayloadTooLarge(f"The file is larger than the upload limit of {self.max_bytes} bytes")
        self._hash.update(data)
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= FLUSH_BYTES:
            await self._flush()

    async def _flush(self) -> None:
        data, self._pending, self._pending_bytes = b"".join(self._pending), [], 0
        await asyncio.to_thread(self._file.write, data)

    async def finish(self) -> StagedBlob:
        try:
            await self._flush()
            await asyncio.to_thread(self._file.close)
        except BaseException:
            self.discard()
            raise
        return StagedBlob(self.path, self.size, self._hash.hexdigest())

    def discard(self) -> None:
        self._file.close()
        self.path.unlink(missing_ok=True)


def _require_upload() -> None:
    access.require_write("uploading a file")
    access.require_global("uploading a file")


class FileService:
    def __init__(
        self,
        db: Database,
        root: Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        limits: ParseLimits | None = None,
    ) -> None:
        self.db = db
        self.root = root
        self.max_bytes = max_bytes
        self.limits = limits or ParseLimits()
        self.tmp_dir = root / "tmp"
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self._cache: OrderedDict[tuple[str, str], ParsedFile] = OrderedDict()
        for stale in self.tmp_dir.iterdir():  # left by a crash mid-upload
            if stale.stat().st_mtime < time.time() - STALE_UPLOAD_S:
                stale.unlink(missing_ok=True)

    def legacy_path(self, sha256: str) -> Path:
        """Where older versions kept a blob on disk."""
        return self.root / sha256[:2] / sha256

    def writer(self) -> BlobWriter:
        _require_upload()  # before a byte of the upload is read
        return BlobWriter(self.tmp_dir, self.max_bytes)

    async def stage(self, chunks: AsyncIterable[bytes]) -> StagedBlob:
        _require_upload()
        writer = self.writer()
        try:
            async for chunk in chunks:
                await writer.write(chunk)
        except BaseException:
            writer.discard()
            raise
        return await writer.finish()

    async def list(self) -> list[FileRow]:
        access.require_global("reading uploaded files")
        async with self.db.connect() as conn:
            return await repo.list_all(conn)

    async def find(self, name: str) -> FileRow | None:
        access.require_global("reading uploaded files")
        async with self.db.connect() as conn:
            return await repo.get(conn, name.lower())

    async def get(self, name: str) -> FileRow:
        row = await self.find(name)
        if row is None:
            raise file_not_found(name)
        return row

    async def save(
        self,
        name: str,
        content: AsyncIterable[bytes] | StagedBlob,
        *,
        original_name: str | None = None,
        content_type: str | None = None,
    ) -> FileRow:
        """Store an upload under `name`: 400 for a bad or taken name or an unreadable file, 413 if too large
        (as uploaded, as inflated, or too costly to parse).

        The format comes from `original_name`'s extension, else from the content (the SDK sends bare names).
        """
        staged: StagedBlob | None = content if isinstance(content, StagedBlob) else None
        try:
            _require_upload()
            key = check_file_name(name)
            if await self.find(key) is not None:
                raise file_exists(key)
            if staged is None:
                staged = await self.stage(content)  # type: ignore[arg-type]
            original = os.path.basename((original_name or "").replace("\x00", "")) or key
            suffix = Path(original).suffix.lower().lstrip(".")
            detected = None if suffix in SUPPORTED else await asyncio.to_thread(detect_extension, staged.path)
            ext = detected or suffix
            shown = key if original == key else f"{key} ({original})"
            parsed = await asyncio.to_thread(parse_isolated, staged.path, shown, ext, self.limits)
            if isinstance(parsed, Tabular):
                check_storable(parsed.columns, f"columns of file {shown}")
            new = NewFile(
                name=key,
                original_name=original,
                content_type=_content_type((content_type or "").replace("\x00", ""), ext),
                extension=ext,
                size_bytes=staged.size,
                sha256=staged.sha256,
                row_count=len(parsed.rows) if isinstance(parsed, Tabular) else None,
                page_count=None if isinstance(parsed, Tabular) else parsed.page_count,
                columns=parsed.columns if isinstance(parsed, Tabular) else None,
            )
            async with self.db.transaction() as conn:
                await repo.lock_blob(conn, staged.sha256)
                row = await repo.insert_new(conn, new)
                if row is None:
                    raise file_exists(key)
                if (
                    await repo.blob_parts(conn, staged.sha256) is None
                ):  # else the same bytes are stored already
                    await _store_blob(conn, staged.path, staged.sha256, staged.size)
        finally:
            if staged is not None:
                staged.path.unlink(missing_ok=True)
        self._remember(row, parsed)
        return row

    async def save_archive(self, staged: StagedBlob, kind: str) -> FileRow:
        """MindsDB's archive upload: the archive's one data file is stored under that file's own name (so a
        name with an extension is refused: "File name cannot contain extension."). 400 for an archive with
        anything else in it or an entry outside it (zip-slip), 413 when the unpacked file is too large."""
        try:
            inner = await asyncio.to_thread(unpack_single, staged.path, kind, self.tmp_dir, self.max_bytes)
        finally:
            staged.path.unlink(missing_ok=True)
        return await self.save(
            inner.name, StagedBlob(inner.path, inner.size, inner.sha256), original_name=inner.name
        )

    async def delete(self, name: str) -> None:
        """Remove the name, and its blob once no other name uses it. Unknown: MindsDB's 400."""
        access.require_write("deleting a file")
        access.require_global("deleting a file")
        async with self.db.transaction() as conn:
            row = await repo.delete(conn, name.lower())
        if row is None:
            raise BadRequest(
                f"There was an error while trying to delete file with name '{name}'",
                title="Error deleting file",
            )
        async with self.db.transaction() as conn:
            await repo.lock_blob(conn, row.sha256)
            if not await repo.blob_in_use(conn, row.sha256):
                await repo.delete_blob(conn, row.sha256)
                await asyncio.to_thread(self.legacy_path(row.sha256).unlink, missing_ok=True)
                self._cache.pop((row.sha256, row.extension), None)

    async def open_parsed(self, name: str) -> ParsedFile:
        """The file's table or text sections, parsed again from its stored bytes (recent small files are
        cached). Callers must not modify the result."""
        access.require_global("reading uploaded files")
        row = await self.get(name)
        cached = self._cache.get((row.sha256, row.extension))
        if cached is not None:
            self._cache.move_to_end((row.sha256, row.extension))
            return cached
        path = await self._fetch(row)
        try:
            parsed = await asyncio.to_thread(parse_isolated, path, row.name, row.extension, self.limits)
        finally:
            path.unlink(missing_ok=True)
        self._remember(row, parsed)
        return parsed

    async def _fetch(self, row: FileRow) -> Path:
        """The file's bytes copied to a temp file (the caller removes it)."""
        missing = NotFound(f"The content of file {row.name} is missing", title="File not found")
        async with self.db.connect() as conn:
            parts = await repo.blob_parts(conn, row.sha256)
        if parts is None and await self._import_legacy(row.sha256):
            async with self.db.connect() as conn:
                parts = await repo.blob_parts(conn, row.sha256)
        if parts is None:
            raise missing
        out = tempfile.NamedTemporaryFile(dir=self.tmp_dir, prefix="read-", delete=False)  # noqa: SIM115
        path = Path(out.name)
        try:
            async with self.db.connect() as conn:
                for part in range(parts):
                    data = await repo.read_part(conn, row.sha256, part)
                    if data is None:  # its last name was deleted meanwhile
                        raise missing
                    await asyncio.to_thread(out.write, data)
            await asyncio.to_thread(out.close)
        except BaseException:
            out.close()
            path.unlink(missing_ok=True)
            raise
        return path

    async def _import_legacy(self, sha256: str) -> bool:
        """Move a blob an older version kept on disk into the database; False if this host has none."""
        path = self.legacy_path(sha256)
        if not await asyncio.to_thread(path.is_file):
            return False
        size = (await asyncio.to_thread(path.stat)).st_size
        async with self.db.transaction() as conn:
            await repo.lock_blob(conn, sha256)
            if await repo.blob_parts(conn, sha256) is None:
                await _store_blob(conn, path, sha256, size)
        await asyncio.to_thread(path.unlink, missing_ok=True)
        return True

    async def import_local_blobs(self) -> int:
        """At start: move the blobs an older version kept in this host's `<root>` into the database (those a
        file row names; others are left). Returns how many were moved."""

        def found() -> list[str]:
            return [
                p.name
                for d in self.root.iterdir()
                if d.is_dir() and len(d.name) == 2
                for p in d.iterdir()
                if len(p.name) == 64 and p.name.startswith(d.name)
            ]

        on_disk = await asyncio.to_thread(found)
        if not on_disk:
            return 0
        async with self.db.connect() as conn:
            named = await repo.referenced_blobs(conn)
        moved = 0
        for sha256 in on_disk:
            if sha256 in named and await self._import_legacy(sha256):
                moved += 1
        if moved:
            log.info("moved %d uploaded file(s) from %s into the database", moved, self.root)
        return moved

    def _remember(self, row: FileRow, parsed: ParsedFile) -> None:
        if row.size_bytes <= CACHE_MAX_FILE_BYTES:
            self._cache[(row.sha256, row.extension)] = parsed
            self._cache.move_to_end((row.sha256, row.extension))
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)


async def _store_blob(conn: AsyncConnection, path: Path, sha256: str, size: int) -> None:
    """Copy the file at `path` into the database as blob `sha256`, part by part (in the caller's transaction)."""
    parts = -(-size // PART_BYTES)
    await repo.insert_blob(conn, sha256, size, parts)
    with path.open("rb") as f:
        for part in range(parts):
            await repo.insert_part(conn, sha256, part, await asyncio.to_thread(f.read, PART_BYTES))


def _content_type(given: str | None, ext: str) -> str:
    if given and given.split(";")[0].strip() not in ("", "application/octet-stream"):
        return given
    return mimetypes.guess_type(f"file.{ext}")[0] or "application/octet-stream"
