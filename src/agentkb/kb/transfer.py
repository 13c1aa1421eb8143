"""The knowledge-base export file: gzip-compressed JSON lines, read and written as a stream.

    {"type": "header", "format": "agentkb-kb-export", "version": 1, "knowledge_base": {...},
     "secrets_omitted": ["embedding_model.api_key"], "documents": 2, "chunks": 3, ...}
    {"type": "chunk", "chunk_id": "...", "doc_id": "...", "content": "...", "content_hash": "...",
     "metadata": {...}, "embedding": "<base64 of little-endian float32>"}
    ...
    {"type": "end", "chunks": 3}

The header holds the KB's definition (embedding and reranking models, columns, params, vector dimension)
**without its secrets**: every credential field (`secrecy.is_secret_key`), sealed value or URL with a
password is left out and its path listed in `secrets_omitted`; an import must give each again. The end
record makes a cut-short file detectable. Vectors are stored exactly (float32), so an import embeds nothing.
A reader counts what the file inflates to: one record past `MAX_LINE`, or the whole past the reader's
`max_inflated` (a gzip bomb), is refused (400 / 413) as soon as it is read.
"""

from __future__ import annotations

import binascii
import gzip
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import IO, Any

import orjson
import pybase64

from agentkb.errors import BadRequest, PayloadTooLarge
from agentkb.secrecy import has_url_password, is_sealed, is_secret_key
from agentkb.storage.chunks import ChunkWrite

FORMAT = "agentkb-kb-export"
VERSION = 1
MEDIA_TYPE = "application/gzip"
SUFFIX = ".agentkb.jsonl.gz"
MAX_LINE = 64 * 1024 * 1024  # one record; a chunk is far smaller
MAX_INFLATED = 64 * 1024**3  # the whole file, inflated (the setting AGENTKB_MAX_IMPORT_INFLATED_BYTES)
MAX_DIM = 4000
DEFINITION_KEYS = (
    "name",
    "embedding_model",
    "reranking_model",
    "metadata_columns",
    "content_columns",
    "id_column",
    "params",
    "vector_dim",
)


def bad_file(detail: str) -> BadRequest:
    return BadRequest(detail, title="Invalid export file")


# --- secrets ------------------------------------------------------------------------------------------


def _is_secret(key: object, value: Any) -> bool:
    return value is not None and (is_secret_key(key) or is_sealed(value) or has_url_password(value))


def strip_secrets(value: Any, path: str = "") -> tuple[Any, list[str]]:
    """A copy of `value` without its secrets, and the dotted paths they were at (list items by index)."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        omitted: list[str] = []
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if _is_secret(key, item):
                omitted.append(where)
                continue
            out[key], inner = strip_secrets(item, where)
            omitted += inner
        return out, omitted
    if isinstance(value, list | tuple):
        items: list[Any] = []
        omitted = []
        for i, item in enumerate(value):
            where = f"{path}.{i}" if path else str(i)
            if _is_secret(None, item):
                omitted.append(where)
                items.append(None)
                continue
            clean, inner = strip_secrets(item, where)
            items.append(clean)
            omitted += inner
        return items, omitted
    return value, []


def put_secrets(
    definition: dict[str, Any], omitted: Iterable[str], given: Mapping[str, str], where: str = ""
) -> dict[str, Any]:
    """`definition` with the secrets `given` (path → value) put back at their paths. Every omitted path
    must be given; a path given that was not omitted must name a field of an object that exists. `where`
    (the models' endpoints) is told with a missing secret, so the operator sees where a key will go."""
    missing = [path for path in omitted if path not in given]
    if missing:
        raise BadRequest(
            f"The export file leaves out the secret(s) {', '.join(missing)}; give them with the import "
            "(HTTP form fields `embedding_api_key` / `reranking_api_key` or `secrets` = a JSON object "
            "{path: value}; CLI --embedding-api-key / --reranking-api-key / --secret PATH=VALUE)"
            + (f". The models call: {where}" if where else ""),
            title="Secrets required",
        )
    if any(is_sealed(value) for value in given.values()):
        raise BadRequest(
            "A secret given with an import must be the plain value, not an encrypted one",
            title="Invalid secret",
        )
    out: dict[str, Any] = orjson.loads(orjson.dumps(definition))  # a deep copy
    for path, value in given.items():
        parts = path.split(".")
        node: Any = out
        for part in parts[:-1]:
            if isinstance(node, dict):
                node = node.get(part)
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                node = None
        last = parts[-1]
        if isinstance(node, dict):
            node[last] = value
        elif isinstance(node, list) and last.isdigit() and int(last) < len(node):
            node[int(last)] = value
        else:
            raise BadRequest(
                f"Secret {path!r} does not name a field of this knowledge base's definition",
                title="Invalid secret",
            )
    return out


# --- writing ------------------------------------------------------------------------------------------


def encode_vector(vector: Any) -> str:
    import numpy as np

    if hasattr(vector, "to_numpy"):  # pgvector's Vector (a server-side cursor's binary rows)
        vector = vector.to_numpy()
    return pybase64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


class ExportEncoder:
    """Records in, gzip bytes out, a piece at a time (nothing is held but the compressor's window)."""

    def __init__(self, level: int = 6) -> None:
        self._z = zlib.compressobj(level, zlib.DEFLATED, 31)  # 31: a gzip member
        self.chunks = 0

    def _lines(self, records: Iterable[Mapping[str, Any]]) -> bytes:
        data = b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in records)
        return self._z.compress(data)

    def header(self, definition: Mapping[str, Any], omitted: list[str], **extra: Any) -> bytes:
        record = {
            "type": "header",
            "format": FORMAT,
            "version": VERSION,
            **extra,
            "knowledge_base": dict(definition),
            "secrets_omitted": omitted,
        }
        return self._lines([record])

    def chunk_rows(self, rows: Iterable[Any]) -> bytes:
        """Rows with chunk_id, doc_id, content, content_hash, metadata, embedding (a storage row)."""
        records = []
        for r in rows:
            records.append(
                {
                    "type": "chunk",
                    "chunk_id": r.chunk_id,
                    "doc_id": r.doc_id,
                    "content": r.content,
                    "content_hash": r.content_hash,
                    "metadata": r.metadata,
                    "embedding": encode_vector(r.embedding),
                }
            )
        self.chunks += len(records)
        return self._lines(records)

    def end(self) -> bytes:
        return self._lines([{"type": "end", "chunks": self.chunks}]) + self._z.flush()


# --- reading ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Header:
    definition: dict[str, Any]
    secrets_omitted: list[str]
    documents: int | None
    chunks: int | None
    source: dict[str, Any]

    @property
    def vector_dim(self) -> int:
        return int(self.definition["vector_dim"])


def _text(record: Mapping[str, Any], key: str, line: int) -> str:
    value = record.get(key)
    if not isinstance(value, str) or "\x00" in value:
        raise bad_file(f"line {line}: '{key}' must be a string without NUL characters")
    return value


def _optional_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _definition(given: Any) -> dict[str, Any]:
    if not isinstance(given, dict):
        raise bad_file("line 1: the header has no 'knowledge_base' object")
    definition = {k: given.get(k) for k in DEFINITION_KEYS}
    if not isinstance(definition["name"], str) or not definition["name"]:
        raise bad_file("line 1: knowledge_base.name must be a non-empty string")
    dim = definition["vector_dim"]
    if not isinstance(dim, int) or isinstance(dim, bool) or not 0 < dim <= MAX_DIM:
        raise bad_file(f"line 1: knowledge_base.vector_dim must be an integer in 1..{MAX_DIM}")
    if not isinstance(definition["embedding_model"], dict) or not definition["embedding_model"]:
        raise bad_file("line 1: knowledge_base.embedding_model must be an object")
    for key in ("reranking_model",):
        if definition[key] is not None and not isinstance(definition[key], dict):
            raise bad_file(f"line 1: knowledge_base.{key} must be an object or null")
    if not isinstance(definition["params"], dict):
        definition["params"] = {}
    for key in ("metadata_columns", "content_columns"):
        value = definition[key]
        if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise bad_file(f"line 1: knowledge_base.{key} must be a list of strings or null")
    if definition["id_column"] is not None and not isinstance(definition["id_column"], str):
        raise bad_file("line 1: knowledge_base.id_column must be a string or null")
    return definition


class ExportReader:
    """Reads an export file (a binary file object, gzip-compressed) record by record. Every defect —
    not gzip, not this format, a newer version, a bad record, a file cut short — raises `BadRequest`."""

    def __init__(self, source: IO[bytes], *, max_inflated: int | None = None) -> None:
        self._gz = gzip.GzipFile(fileobj=source, mode="rb")
        self.max_inflated = MAX_INFLATED if max_inflated is None else max_inflated
        self.inflated = 0
        self.line = 0
        self.header: Header | None = None
        self.chunks = 0
        self.ended = False

    def _record(self) -> dict[str, Any] | None:
        try:
            raw = self._gz.readline(MAX_LINE)
        except EOFError as exc:
            raise bad_file(f"The file is cut short or corrupt after line {self.line} ({exc})") from exc
        except (OSError, zlib.error) as exc:  # BadGzipFile is an OSError
            if self.line == 0:
                raise bad_file("Not an agentkb export: the file is not gzip-compressed") from exc
            raise bad_file(f"The file is cut short or corrupt after line {self.line} ({exc})") from exc
        if not raw:
            return None
        self.line += 1
        self.inflated += len(raw)
        if self.inflated > self.max_inflated:
            raise PayloadTooLarge(
                f"The export file inflates past {self.max_inflated} bytes by line {self.line} (the limit for an "
                "import, AGENTKB_MAX_IMPORT_INFLATED_BYTES)",
                title="Export file too large when inflated",
            )
        if not raw.endswith(b"\n") and len(raw) >= MAX_LINE:
            raise bad_file(f"line {self.line}: a record longer than {MAX_LINE} bytes")
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise bad_file(f"line {self.line}: not JSON ({exc})") from exc
        if not isinstance(record, dict):
            raise bad_file(f"line {self.line}: a record must be a JSON object")
        return record

    def read_header(self) -> Header:
        record = self._record()
        if record is None or record.get("type") != "header" or record.get("format") != FORMAT:
            raise bad_file(f"Not an agentkb export: the first record must be the '{FORMAT}' header")
        version = record.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise bad_file("line 1: the header has no valid 'version'")
        if version > VERSION:
            raise bad_file(
                f"The file is format version {version}; this agentkb reads version {VERSION} and older: "
                "upgrade agentkb to import it"
            )
        omitted = record.get("secrets_omitted") or []
        if not isinstance(omitted, list) or not all(isinstance(p, str) for p in omitted):
            raise bad_file("line 1: 'secrets_omitted' must be a list of strings")
        source = {k: v for k, v in record.items() if k in ("agentkb_version", "exported_at", "project")}
        self.header = Header(
            _definition(record.get("knowledge_base")),
            omitted,
            _optional_int(record.get("documents")),
            _optional_int(record.get("chunks")),
            source,
        )
        return self.header

    def read_chunks(self, limit: int) -> list[ChunkWrite]:
        """Up to `limit` chunks; [] once the end record is read (a file ending without it is cut short)."""
        assert self.header is not None, "read_header first"
        out: list[ChunkWrite] = []
        while len(out) < limit and not self.ended:
            record = self._record()
            if record is None:
                raise bad_file(
                    f"The file is cut short: no end record after {self.chunks} chunks (line {self.line})"
                )
            kind = record.get("type")
            if kind == "end":
                if record.get("chunks") != self.chunks:
                    raise bad_file(
                        f"line {self.line}: the end record counts {record.get('chunks')} chunks, "
                        f"the file has {self.chunks}"
                    )
                if self._record() is not None:
                    raise bad_file(f"line {self.line}: records after the end record")
                self.ended = True
                break
            if kind != "chunk":
                raise bad_file(f"line {self.line}: unknown record type {kind!r}")
            out.append(self._chunk(record))
            self.chunks += 1
        return out

    def _chunk(self, record: Mapping[str, Any]) -> ChunkWrite:
        import numpy as np

        assert self.header is not None
        metadata = record.get("metadata")
        if not isinstance(metadata, dict):
            raise bad_file(f"line {self.line}: 'metadata' must be an object")
        encoded = record.get("embedding")
        try:
            data = pybase64.b64decode(encoded, validate=True) if isinstance(encoded, str) else b""
        except (binascii.Error, ValueError) as exc:
            raise bad_file(f"line {self.line}: 'embedding' is not base64") from exc
        dim = self.header.vector_dim
        if len(data) != 4 * dim:
            raise bad_file(
                f"line {self.line}: 'embedding' must hold {dim} float32 values (the knowledge base's "
                f"dimension), it has {len(data) / 4:g}"
            )
        vector = np.frombuffer(data, dtype="<f4").astype(np.float32)
        if not bool(np.isfinite(vector).all()):
            raise bad_file(f"line {self.line}: 'embedding' holds a value that is not a finite number")
        if "\\u0000" in orjson.dumps(metadata).decode():
            raise bad_file(f"line {self.line}: 'metadata' holds a NUL character")
        return ChunkWrite(
            _text(record, "chunk_id", self.line),
            _text(record, "doc_id", self.line),
            _text(record, "content", self.line),
            _text(record, "content_hash", self.line),
            metadata,
            vector,
        )
