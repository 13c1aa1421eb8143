"""What a tool gives back: its result type, and MindsDB's observation texts for query results (MindsDB 25.14
`SQLAgent.query`, `list_to_csv_str`)."""

from __future__ import annotations

import csv
import io
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Number
from typing import Any, Literal

SHOWN_ROWS = 30  # MindsDB describes larger results and shows their first 30 rows
SAMPLE_CHARS = 100


@dataclass(frozen=True)
class Citation:
    kind: Literal["kb", "table"]
    name: str  # kb: "<project>.<kb>"; table: "<ds>.<table>"
    chunk_id: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class ToolResult:
    observation: str
    citations: tuple[Citation, ...] = ()
    context: tuple[dict[str, Any], ...] = ()  # {"page_content", "metadata"} per KB hit; row dicts for tables


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_description: str  # the one string argument, named "tool_input"


def to_csv(rows: Sequence[Sequence[Any]]) -> str:
    """MindsDB's `list_to_csv_str`: csv.writer(dialect="excel"), CRLF line ends, `str()` of each cell."""
    out = io.StringIO()
    csv.writer(out, dialect="excel").writerows([[str(v) for v in row] for row in rows])
    return out.getvalue()


def is_number(value: Any) -> bool:
    return isinstance(value, Number) and not isinstance(value, bool)


def describe(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A small stand-in for pandas' `describe(include="all")`: count, unique, top, freq, mean, min, max."""
    labels = ("count", "unique", "top", "freq", "mean", "min", "max")
    table: list[list[str]] = [["", *columns]] + [[label] for label in labels]
    for i in range(len(columns)):
        values = [row[i] for row in rows if row[i] is not None]
        counts = Counter(str(v) for v in values)
        top, freq = counts.most_common(1)[0] if counts else ("NaN", "NaN")
        numeric = bool(values) and all(is_number(v) for v in values)
        stats: list[Any] = [len(values), "NaN", "NaN", "NaN", "NaN", "NaN", "NaN"]
        if numeric:
            stats[4:] = [round(statistics.fmean(float(v) for v in values), 6), min(values), max(values)]
        elif values:
            stats[1:4] = [len(counts), top if len(top) <= 40 else top[:37] + "...", freq]
        for line, value in zip(table[1:], stats, strict=True):
            line.append(str(value))
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=False))
        )
        for line in table
    )


def format_result(columns: Sequence[str], rows: Sequence[Sequence[Any]], truncated: bool = False) -> str:
    """MindsDB's observation for a query result; a truncated one says which rows it holds."""
    text = f"Output columns: {', '.join(repr(c) for c in columns)}\n"
    if len(rows) > SHOWN_ROWS:
        count = f"more than {len(rows)} rows (first {len(rows)} rows)" if truncated else f"{len(rows)} rows"
        text += f"\nResult has {count}. Description of data:\n{describe(columns, rows)}\n\n"
        text += f"First {SHOWN_ROWS} rows:\n"
    else:
        text += "Result in CSV format (dialect is 'excel'):\n"
    text += to_csv([list(columns), *rows[:SHOWN_ROWS]])
    if truncated and len(rows) <= SHOWN_ROWS:
        text += f"(first {len(rows)} rows)\n"
    return text


def cut(value: Any) -> str:
    text = str(value)
    return text[:SAMPLE_CHARS] + "..." if len(text) > SAMPLE_CHARS else text
