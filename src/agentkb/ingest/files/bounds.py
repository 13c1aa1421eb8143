"""What parsing one uploaded file may cost: inflated bytes of an office file's parts, cells of a sheet, time.

DOCX, PPTX and XLSX files are zip archives whose parts (`word/document.xml`, `xl/sharedStrings.xml`, ...)
the parser libraries inflate whole into memory. A small upload whose part inflates to gigabytes (a "zip
bomb") is refused with 413 before any library reads it: first by the sizes the zip's central directory
declares, then by inflating every part and counting what really comes out — a directory that understates
a size gets no further than the limit, since the count stops there, not at the declared size.
"""

from __future__ import annotations

import copy
import zipfile
from dataclasses import dataclass
from pathlib import Path

from agentkb.errors import BadRequest, PayloadTooLarge

OFFICE_EXTENSIONS = frozenset({"docx", "pptx", "xlsx"})
READ_BYTES = 1 << 20
UNBOUNDED = 1 << 62


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """Defaults as the settings' (`AGENTKB_MAX_INFLATED_MEMBER_BYTES`, `AGENTKB_MAX_INFLATED_BYTES`,
    `AGENTKB_MAX_SHEET_CELLS`, `AGENTKB_PARSE_TIMEOUT_S`)."""

    member_bytes: int = 256 << 20
    total_bytes: int = 1 << 30
    sheet_cells: int = 10_000_000
    timeout_s: float = 120.0


def size_text(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


def _member_too_large(name: str, part: str, limits: ParseLimits, verb: str) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"File {name}: {part} {verb} past {size_text(limits.member_bytes)} (the limit for one part of an "
        "office file, AGENTKB_MAX_INFLATED_MEMBER_BYTES)",
        title="File too large when inflated",
    )


def _total_too_large(name: str, limits: ParseLimits, verb: str) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"File {name}: its parts {verb} past {size_text(limits.total_bytes)} in all (the limit for an office "
        "file, AGENTKB_MAX_INFLATED_BYTES)",
        title="File too large when inflated",
    )


def check_office_zip(path: Path, name: str, limits: ParseLimits, ext: str = "docx") -> None:
    """413 when a part of the office file at `path` inflates (or declares it does) past `limits`; 400 for a
    file that is not a readable zip."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            declared = 0
            for info in infos:
                if info.file_size > limits.member_bytes:
                    raise _member_too_large(name, info.filename, limits, "declares it inflates")
                declared += info.file_size
                if declared > limits.total_bytes:
                    raise _total_too_large(name, limits, "declare they inflate")
            total = 0
            for info in infos:
                total += _inflated_size(archive, info, name, ext, limits, limits.total_bytes - total)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, OSError) as exc:
        raise BadRequest(
            f"File {name} is not a valid .{ext} file: not a readable zip ({exc})", title="Invalid file"
        ) from exc


def _inflated_size(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, ext: str, limits: ParseLimits, total_left: int
) -> int:
    """The part's real inflated size, counted up to the limits (whatever its header declares)."""
    if info.is_dir():
        return 0
    probe = copy.copy(info)
    # zipfile stops inflating at the declared size (and checks the CRC there): declared as unbounded, the
    # part inflates as far as its data goes, and the count below stops it at the limit
    probe.file_size = UNBOUNDED
    size = 0
    with archive.open(probe) as part:
        while chunk := part.read(READ_BYTES):
            size += len(chunk)
            if size > limits.member_bytes:
                raise _member_too_large(name, info.filename, limits, "inflates")
            if size > total_left:
                raise _total_too_large(name, limits, "inflate")
    if size != info.file_size:  # the parser's own read would stop short (or wait for bytes never there)
        raise BadRequest(
            f"File {name} is not a valid .{ext} file: {info.filename} inflates to {size} bytes, its header "
            f"declares {info.file_size}",
            title="Invalid file",
        )
    return size
