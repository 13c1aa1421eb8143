"""Uploaded archives (`.zip`, `.tar.gz`), unpacked as MindsDB does: the archive must hold exactly one data
file, in its root; that file is what gets stored.

Safer than extracting the archive: nothing but that one file's bytes is written, to a temp file of our
naming, so no entry can land outside the upload folder. An entry that would (an absolute name, `..`:
"zip-slip"), a link, a device or any other special entry refuses the whole archive with 400 (MindsDB: 500);
so does unpacked content over the upload limit (413: a "zip bomb" stops at the limit).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from agentkb.errors import BadRequest, PayloadTooLarge

SUFFIXES = {".zip": "zip", ".tar.gz": "tar.gz"}  # MindsDB's archive formats
CHUNK = 1 << 20
_DRIVE = re.compile(r"^[A-Za-z]:")  # `C:\...`: absolute on Windows


@dataclass(frozen=True, slots=True)
class Unpacked:
    name: str  # the data file's name in the archive
    path: Path
    size: int
    sha256: str


def archive_kind(filename: str | None) -> str | None:
    """`zip` or `tar.gz` when the uploaded file's name says it is an archive."""
    lowered = (filename or "").lower()
    return next((kind for suffix, kind in SUFFIXES.items() if lowered.endswith(suffix)), None)


def invalid_archive(detail: str) -> BadRequest:
    return BadRequest(detail, title="Invalid archive")


def wrong_content(detail: str) -> BadRequest:
    return BadRequest(detail, title="Wrong content.")  # MindsDB's title


def _check_entry(name: str, kind: str) -> list[str]:
    """The entry's path parts; 400 for one that would be written outside the folder it is unpacked in."""
    normalized = posixpath.normpath(name.replace("\\", "/"))
    if (
        name.startswith(("/", "\\"))
        or normalized == ".."
        or normalized.startswith("../")
        or _DRIVE.match(name)
    ):
        label = "Zip File" if kind == "zip" else "tar file"
        raise invalid_archive(f"Attempted Path Traversal in {label}: entry {name!r} is outside the archive")
    return [p for p in normalized.split("/") if p not in ("", ".")]


def unpack_single(path: Path, kind: str, out_dir: Path, max_bytes: int) -> Unpacked:
    """The archive's one data file, copied to a temp file in `out_dir` (hashed and counted on the way)."""
    try:
        if kind == "zip":
            with zipfile.ZipFile(path) as archive:
                return _zip_member(archive, out_dir, max_bytes)
        with tarfile.open(path, "r:gz") as archive:
            return _tar_member(archive, out_dir, max_bytes)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise invalid_archive(f"The file is not a readable {kind} archive: {exc}") from exc


def _only_root_file(entries: list[tuple[list[str], bool]]) -> int:
    """Index of the one root-level file among (path parts, is a file) entries; MindsDB's refusals otherwise."""
    roots = {parts[0] for parts, _ in entries if parts}
    if len(roots) != 1:
        raise wrong_content("Archive must contain only one data file.")
    for index, (parts, is_file) in enumerate(entries):
        if len(parts) == 1 and is_file:
            return index
    raise wrong_content("Archive must contain data file in root.")


def _zip_member(archive: zipfile.ZipFile, out_dir: Path, max_bytes: int) -> Unpacked:
    infos = archive.infolist()
    entries = []
    for info in infos:
        parts = _check_entry(info.filename, "zip")
        if (info.external_attr >> 16) & 0o170000 == 0o120000:  # a symbolic link
            raise invalid_archive(f"Links are not allowed in an archive: {info.filename!r}")
        entries.append((parts, not info.is_dir()))
    info = infos[_only_root_file(entries)]
    with archive.open(info) as source:
        return _copy(source, info.filename, out_dir, max_bytes)


def _tar_member(archive: tarfile.TarFile, out_dir: Path, max_bytes: int) -> Unpacked:
    members = archive.getmembers()
    entries = []
    for member in members:
        parts = _check_entry(member.name, "tar.gz")
        if not (member.isfile() or member.isdir()):
            raise invalid_archive(f"Only files and folders are allowed in an archive: {member.name!r}")
        entries.append((parts, member.isfile()))
    member = members[_only_root_file(entries)]
    source = archive.extractfile(member)
    if source is None:  # pragma: no cover - a regular file always has content
        raise invalid_archive(f"Cannot read {member.name!r} from the archive")
    with source:
        return _copy(source, member.name, out_dir, max_bytes)


def _copy(source: IO[bytes], name: str, out_dir: Path, max_bytes: int) -> Unpacked:
    digest, size = hashlib.sha256(), 0
    with tempfile.NamedTemporaryFile(dir=out_dir, prefix="unpacked-", delete=False) as target:
        try:
            while chunk := source.read(CHUNK):
                size += len(chunk)
                if size > max_bytes:
                    raise PayloadTooLarge(
                        f"The unpacked file is larger than the upload limit of {max_bytes} bytes"
                    )
                digest.update(chunk)
                target.write(chunk)
        except BaseException:
            target.close()
            Path(target.name).unlink(missing_ok=True)
            raise
    return Unpacked(
        posixpath.basename(posixpath.normpath(name.replace("\\", "/"))),
        Path(target.name),
        size,
        digest.hexdigest(),
    )
