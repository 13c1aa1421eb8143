"""The format of an uploaded file that has no usable extension (the SDK uploads DataFrames as bare CSV)."""

from __future__ import annotations

import csv
import zipfile
from pathlib import Path

from agentkb.ingest.files.parse import decode_text

OFFICE = (("word/", "docx"), ("ppt/", "pptx"), ("xl/", "xlsx"))


def detect_extension(path: Path) -> str | None:
    """The format of a file without a usable extension (the SDK uploads DataFrames as bare CSV), or None."""
    with path.open("rb") as f:
        head = f.read(65536)
    if head.startswith(b"%PDF"):
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except zipfile.BadZipFile:
            return None
        return next((ext for prefix, ext in OFFICE if any(n.startswith(prefix) for n in names)), None)
    try:
        text = decode_text(head, partial=True)
    except UnicodeError:
        return None
    start = text.lstrip()[:64].lower()
    if start.startswith(("{", "[")):
        return "json"
    if start.startswith(("<!doctype html", "<html", "<head", "<body")):
        return "html"
    return "csv" if _looks_tabular(text) else "txt"


def _looks_tabular(text: str) -> bool:
    """Two or more lines (the last may be cut), all with the same number (> 1) of sniffed fields."""
    lines = [line for line in text.splitlines()[:21] if line.strip()][:-1] or text.splitlines()[:1]
    try:
        delimiter = csv.Sniffer().sniff("\n".join(lines), delimiters=",;\t|").delimiter
    except csv.Error:
        return False
    widths = {len(record) for record in csv.reader(lines, delimiter=delimiter)}
    return len(lines) >= 2 and len(widths) == 1 and widths.pop() >= 2
