"""MindsDB's JSON chunking (`interfaces/knowledge_base/preprocessing/json_chunker.py`): each document's
content parsed as JSON (else as a Python literal, as MindsDB does), then one chunk per object of a list, one
for an object (`chunk_by_object`) or one per field of it, with the texts, chunk ids and `field_*` metadata
MindsDB makes. A document that is neither JSON nor a literal becomes MindsDB's error chunk
(`<id>_error`, "Error processing document: …"), as in MindsDB.

Pure: the caller (`kb.chunking`) adds the bookkeeping metadata (`_original_doc_id`, `_chunk_index`, ...).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentkb.kb.preprocessing import JSONOptions

PARSE_ERROR = "Content is neither valid JSON nor a valid Python literal."


@dataclass(slots=True)
class Piece:
    """One chunk of a JSON document: its id, text, 0-based index and its own metadata (`field_*`, ...)."""

    chunk_id: str
    content: str
    index: int
    metadata: dict[str, Any] = field(default_factory=dict)


def _parse(content: str) -> Any:
    try:
        return json.loads(content)
    except ValueError:  # json.JSONDecodeError
        pass
    try:
        return ast.literal_eval(content)
    except (SyntaxError, ValueError):
        return _UNPARSED


_UNPARSED = object()


def _primitive(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) and value is not None


class JSONChunker:
    def __init__(self, options: JSONOptions) -> None:
        self.o = options

    def _id(self, doc_id: str, index: int, total: int, content: str) -> str:
        return f"{doc_id}:{self.o.content_column}:{index + 1}of{total}:0to{len(content)}"

    def pieces(self, doc_id: str, content: str) -> list[Piece]:
        """The chunks of one document, or its one error chunk."""
        try:
            data = _parse(content)
            if data is _UNPARSED or data is None:  # MindsDB takes a JSON `null` for a failed parse too
                return [self._error(doc_id, PARSE_ERROR)]
            if isinstance(data, list):
                return [self._item(doc_id, item, i, len(data)) for i, item in enumerate(data)]
            if isinstance(data, dict):
                if self.o.chunk_by_object:
                    return [self._object(doc_id, data, 0, 1)]
                return self._fields(doc_id, data)
            return [self._scalar(doc_id, data, 0, 1)]
        except Exception as exc:  # MindsDB's too: any failure on a document makes its error chunk
            return [self._error(doc_id, str(exc))]

    def _error(self, doc_id: str, message: str) -> Piece:
        return Piece(f"{doc_id}_error", f"Error processing document: {message}", 0)

    def _item(self, doc_id: str, item: Any, index: int, total: int) -> Piece:
        if isinstance(item, dict):
            return self._object(doc_id, item, index, total)
        if isinstance(item, list):
            return self._scalar(doc_id, json.dumps(item), index, total)
        return self._scalar(doc_id, item, index, total)

    def _object(self, doc_id: str, data: dict[str, Any], index: int, total: int) -> Piece:
        if self.o.flatten_nested:
            content = _dict_to_text(self._filter(_flatten(data, self.o.nested_delimiter)))
        else:
            kept = {
                k: v
                for k, v in data.items()
                if (not self.o.include_fields or k in self.o.include_fields)
                and k not in self.o.exclude_fields
            }
            content = json.dumps(kept, indent=2)
        piece = Piece(self._id(doc_id, index, total, content), content, index)
        self._extract(data, piece.metadata)
        return piece

    def _fields(self, doc_id: str, data: dict[str, Any]) -> list[Piece]:
        kept = {
            k: v
            for k, v in data.items()
            if (not self.o.include_fields or k in self.o.include_fields) and k not in self.o.exclude_fields
        }
        pieces = []
        for i, (key, value) in enumerate(kept.items()):
            content = self._field_text(key, value)
            piece = Piece(self._id(doc_id, i, len(kept), content), content, i, {"field_name": key})
            self._extract(data, piece.metadata)
            pieces.append(piece)
        return pieces

    def _scalar(self, doc_id: str, value: Any, index: int, total: int) -> Piece:
        content = str(value)
        piece = Piece(self._id(doc_id, index, total, content), content, index)
        if self.o.extract_all_primitives:
            piece.metadata["field_value"] = value
        return piece

    def _filter(self, flat: dict[str, Any]) -> dict[str, Any]:
        delimiter = self.o.nested_delimiter
        if self.o.include_fields:
            flat = {
                k: v
                for k, v in flat.items()
                if any(k == f or k.startswith(f + delimiter) for f in self.o.include_fields)
            }
        else:
            flat = dict(flat)
        for excluded in self.o.exclude_fields:
            flat.pop(excluded, None)
            for key in [k for k in flat if k.startswith(excluded + delimiter)]:
                flat.pop(key)
        return flat

    def _field_text(self, key: str, value: Any) -> str:
        if isinstance(value, dict):
            if self.o.flatten_nested:
                return _dict_to_text(_flatten(value, self.o.nested_delimiter, key))
            return f"{key}: {json.dumps(value, indent=2)}"
        if isinstance(value, list):
            if all(isinstance(item, dict) for item in value):
                return "\n".join([f"{key}:", *_items(value)])
            return f"{key}: {', '.join(str(item) for item in value if item is not None)}"
        return f"{key}: {value}"

    def _extract(self, data: dict[str, Any], metadata: dict[str, Any]) -> None:
        """MindsDB's `_extract_fields_to_metadata`: `field_<key>` entries for filtering."""
        flat = _flatten(data, self.o.nested_delimiter)
        if self.o.extract_all_primitives:
            metadata.update({f"field_{k}": v for k, v in flat.items() if _primitive(v)})
            return
        if not self.o.metadata_fields:
            top = {f"field_{k}": v for k, v in data.items() if _primitive(v)}
            metadata.update(top or {f"field_{k}": v for k, v in flat.items() if _primitive(v)})
            return
        for name in self.o.metadata_fields:
            if flat.get(name) is not None:
                metadata[f"field_{name}"] = flat[name]
                continue
            current: Any = data
            for part in name.split(self.o.nested_delimiter):
                if not isinstance(current, Mapping) or part not in current:
                    break
                current = current[part]
            else:
                if current is not None:
                    metadata[f"field_{name}"] = current


def _flatten(data: Mapping[Any, Any], delimiter: str, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{delimiter}{k}" if prefix else k
        if isinstance(v, dict):
            out.update(_flatten(v, delimiter, key))
        elif isinstance(v, list) and all(isinstance(item, dict) for item in v):
            for i, item in enumerate(v):
                out.update(_flatten(item, delimiter, f"{key}[{i}]"))
        else:
            out[key] = v
    return out


def _items(value: list[dict[Any, Any]]) -> list[str]:
    lines = []
    for i, item in enumerate(value):
        lines.append(f"  Item {i + 1}:")
        lines.extend(f"    {k}: {v}" for k, v in item.items())
    return lines


def _dict_to_text(data: Mapping[Any, Any]) -> str:
    lines = []
    for key, value in data.items():
        if value is None:
            continue
        if isinstance(value, list):
            if not value:
                continue
            if all(isinstance(item, dict) for item in value):
                lines.append(f"{key}:")
                lines.extend(_items(value))
            else:
                lines.append(f"{key}: {', '.join(str(item) for item in value)}")
        else:
            lines.append(f"{key}: {value}")
    return "\n".join(lines)
