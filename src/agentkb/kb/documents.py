"""Rows → documents, with MindsDB's column rules: one document per content column per row."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agentkb.errors import BadRequest

ROWS_SOURCE = "TextChunkingPreprocessor"  # MindsDB's `_source` for rows and SQL inserts


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """A knowledge base's column settings (all optional)."""

    id_column: str | None = None
    content_columns: tuple[str, ...] | None = None
    metadata_columns: tuple[str, ...] | None = None


# not frozen (treated as immutable all the same): a frozen dataclass's __init__ sets each field through
# object.__setattr__, several times the cost of a plain one, and an insert makes one per row
@dataclass(slots=True)
class Document:
    doc_id: str  # the id as text (storage key)
    original_id: Any  # the id as given (MindsDB keeps its type), or the content hash
    content_column: str
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    row_index: int = 0
    source: str = ROWS_SOURCE


def content_id(content: str) -> str:
    """MindsDB's id for a document without one: the first 16 hex digits of the md5 of its content."""
    return hashlib.md5(content.encode()).hexdigest()[:16]


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):  # NaN from DataFrames
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    text = value if isinstance(value, str) else str(value)
    return text if text.strip() else None


def json_safe(value: Any) -> Any:
    """`value` as JSON can hold it: non-finite floats as null, tuples as lists, other types as text."""
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if isinstance(value, float):
        return None if not math.isfinite(value) else value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return str(value)


def _find(columns: Iterable[str], wanted: str) -> str | None:
    lowered = wanted.lower()
    return next((c for c in columns if c.lower() == lowered), None)


def resolve_columns(columns: list[str], spec: ColumnSpec) -> tuple[str | None, list[str], list[str]]:
    """(id column, content columns, metadata columns) for a dataset with these columns."""
    id_col = _find(columns, spec.id_column) if spec.id_column else _find(columns, "id")
    rest = [c for c in columns if c != id_col]
    if spec.content_columns:
        content = [c for c in spec.content_columns if c in columns]
        if not content:
            raise BadRequest(
                f"Content columns {list(spec.content_columns)} not found in dataset (columns: {columns})",
                title="Invalid rows",
            )
    elif spec.metadata_columns:
        content = [c for c in rest if c not in spec.metadata_columns]
    elif _find(rest, "content"):
        content = [_find(rest, "content")]  # type: ignore[list-item]
    else:
        content = rest
    if not content:
        raise BadRequest(f"No content column in dataset (columns: {columns})", title="Invalid rows")
    if spec.metadata_columns:
        metadata = [c for c in spec.metadata_columns if c in columns and c not in content]
    else:
        metadata = [c for c in rest if c not in content]
    return id_col, content, metadata


def row_documents(
    rows: Iterable[dict[str, Any]], spec: ColumnSpec, *, start_index: int = 0, source: str = ROWS_SOURCE
) -> Iterator[Document]:
    """Documents of each row. A row lacking every content column is a 400 naming it; a content cell that is
    null or blank makes no document (a table with some empty cells still loads)."""
    resolved: dict[tuple[str, ...], tuple[str | None, list[str], list[str]]] = {}
    for offset, row in enumerate(rows):
        index = start_index + offset
        if not isinstance(row, dict) or not row:
            raise BadRequest(f"Row {index} must be a non-empty JSON object", title="Invalid rows")
        key = tuple(row)
        if key not in resolved:
            try:
                resolved[key] = resolve_columns([str(c) for c in row], spec)
            except BadRequest as exc:
                raise BadRequest(f"Row {index}: {exc.detail}", title=exc.title) from exc
        id_col, content_cols, metadata_cols = resolved[key]
        metadata: dict[str, Any] = {}
        for column in metadata_cols:
            value = json_safe(row.get(column))
            if isinstance(value, dict):
                metadata.update(value)  # MindsDB merges dict values into the metadata
            else:
                metadata[column] = value
        if not any(column in row for column in content_cols):
            raise BadRequest(
                f"Row {index} has none of the content column(s) {content_cols}", title="Invalid rows"
            )
        texts = [(column, _text(row.get(column))) for column in content_cols]  # empty cells make no document
        given_id = row.get(id_col) if id_col else None
        for column, text in texts:
            if text is None:
                continue
            original = json_safe(given_id) if given_id is not None else content_id(text)
            yield Document(
                doc_id=str(original),
                original_id=original,
                content_column=column,
                content=text,
                metadata=metadata,
                row_index=index,
                source=source,
            )
