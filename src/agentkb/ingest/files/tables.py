"""Uploaded tables: CSV/TSV (delimiter sniffed), XLSX (the first sheet, as MindsDB reads it), JSON (an array of
objects, or one object) and JSON Lines → `Tabular` (columns, rows), numbers inferred as pandas reads them."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

from agentkb.errors import PayloadTooLarge


class Invalid(ValueError):
    """A parser's verdict on the content, reported as is."""


@dataclass(frozen=True, slots=True)
class Tabular:
    columns: list[str]
    rows: list[dict[str, Any]]


def _unique_columns(header: list[str]) -> list[str]:
    """pandas' names: `Unnamed: i` for a blank header, `x.1`, `x.2` for repeats."""
    columns: list[str] = []
    for i, raw in enumerate(header):
        base = raw.strip() or f"Unnamed: {i}"
        name, n = base, 0
        while name in columns:
            n += 1
            name = f"{base}.{n}"
        columns.append(name)
    return columns


_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def _infer_numbers(columns: list[str], rows: list[dict[str, Any]]) -> None:
    """Columns whose every value is an integer (or a number) become int (or float), as pandas reads them."""
    for column in columns:
        values = [row[column] for row in rows if row.get(column) is not None]
        if not values:
            continue
        kind: Callable[[str], Any] | None = None
        if all(_INT.fullmatch(v) for v in values):
            kind = int
        elif all(_FLOAT.fullmatch(v) for v in values):
            kind = float
        if kind is not None:
            for row in rows:
                if row.get(column) is not None:
                    row[column] = kind(row[column])


def csv_table(text: str, delimiter: str | None = None) -> Tabular:
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text[:65536], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = next((record for record in reader if any(cell.strip() for cell in record)), None)
    if header is None:
        raise Invalid("no header row")
    columns = _unique_columns(header)
    rows = []
    for record in reader:
        if not any(cell.strip() for cell in record):
            continue
        if len(record) > len(columns) and any(cell.strip() for cell in record[len(columns) :]):
            raise Invalid(f"line {reader.line_num}: expected {len(columns)} fields, saw {len(record)}")
        rows.append(
            {c: (v if v != "" else None) for c, v in zip(columns, record + [""] * len(columns), strict=False)}
        )
    _infer_numbers(columns, rows)
    return Tabular(columns, rows)


def _records(records: list[Any], where: str) -> Tabular:
    if not records:
        raise Invalid(f"{where} has no rows")
    columns: dict[str, None] = {}
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise Invalid(f"{where} item {i} is not an object")
        columns.update(dict.fromkeys(str(k) for k in record))
    return Tabular(list(columns), [{str(k): v for k, v in record.items()} for record in records])


def json_lines_table(text: str) -> Tabular:
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise Invalid(f"line {number}: {exc}") from exc
    return _records(records, "the file")


def json_table(text: str) -> Tabular:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # JSON Lines under a .json name
            return json_lines_table(text)
        raise Invalid(str(exc)) from exc
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise Invalid("expected an array of objects")
    return _records(data, "the array")


def _too_many_cells(name: str, max_cells: int, what: str) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"File {name}: the first sheet {what} more than {max_cells} cells (the limit for a sheet, "
        "AGENTKB_MAX_SHEET_CELLS)",
        title="Sheet too large",
    )


def _counted(records: Iterator[tuple[Any, ...]], name: str, max_cells: int) -> Iterator[tuple[Any, ...]]:
    """The rows, refused once they hold more than `max_cells` cells (an empty row counts as one)."""
    cells = 0
    for record in records:
        cells += max(1, len(record))
        if cells > max_cells:
            raise _too_many_cells(name, max_cells, "holds")
        yield record


def xlsx_table(path: Path, name: str, max_cells: int) -> Tabular:
    """The first sheet, read row by row (openpyxl's read-only mode). 413 when its declared dimension or
    the rows it really holds pass `max_cells`: read-only mode pads every row to the declared width."""
    import openpyxl

    with path.open("rb") as f:  # a file object: openpyxl refuses paths without an .xlsx suffix
        book = openpyxl.load_workbook(f, read_only=True, data_only=True)
        try:
            sheet = book.worksheets[0]
            height, width = sheet.max_row, sheet.max_column  # the declared dimension, None when absent
            if height is not None and width is not None and height * width > max_cells:
                raise _too_many_cells(name, max_cells, f"declares {height} rows x {width} columns:")
            records = _counted(sheet.iter_rows(values_only=True), name, max_cells)
            header = next((r for r in records if any(v not in (None, "") for v in r)), None)
            if header is None:
                raise Invalid("the first sheet is empty")
            cells = ["" if v is None else str(v) for v in header]
            while cells and not cells[-1].strip():
                cells.pop()
            columns = _unique_columns(cells)
            rows = [
                {
                    c: v.isoformat() if isinstance(v, (datetime, date, time)) else v
                    for c, v in zip(columns, record, strict=False)
                }
                for record in records
                if any(v not in (None, "") for v in record)
            ]
        finally:
            book.close()
    return Tabular(columns, rows)
