"""Documents → chunks (semantic-text-splitter), with MindsDB's chunk ids and bookkeeping metadata."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import version
from typing import Any

import orjson
from semantic_text_splitter import TextSplitter

from agentkb.errors import BadRequest
from agentkb.kb.documents import Document

DEFAULT_CHUNK_SIZE = 1000  # MindsDB's defaults
DEFAULT_CHUNK_OVERLAP = 200
MAX_CHUNK_SIZE = 100_000


@dataclass(frozen=True, slots=True)
class ChunkingConfig:
    chunk_size: int = DEFAULT_CHUNK_SIZE
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP


# not frozen, as `kb.documents.Document` says why
@dataclass(slots=True)
class Chunk:
    chunk_id: str
    doc_id: str
    content: str
    content_hash: str
    metadata: dict[str, Any]


def _int(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadRequest(f"'{name}' must be an integer", title="Invalid preprocessing configuration")
    return value


def chunking_config(params: dict[str, Any]) -> ChunkingConfig:
    """Read chunk size/overlap from `params` (`chunk_size`, `chunk_overlap`) or MindsDB's
    `params.preprocessing.text_chunking_config`; validate them."""
    preprocessing = params.get("preprocessing") or {}
    nested = preprocessing.get("text_chunking_config") or {} if isinstance(preprocessing, dict) else {}
    size = _int(nested.get("chunk_size", params.get("chunk_size", DEFAULT_CHUNK_SIZE)), "chunk_size")
    overlap = _int(
        nested.get("chunk_overlap", params.get("chunk_overlap", DEFAULT_CHUNK_OVERLAP)), "chunk_overlap"
    )
    if not 1 <= size <= MAX_CHUNK_SIZE:
        raise BadRequest(
            f"'chunk_size' must be in 1..{MAX_CHUNK_SIZE}", title="Invalid preprocessing configuration"
        )
    if not 0 <= overlap < size:
        raise BadRequest(
            "'chunk_overlap' must be ≥ 0 and smaller than 'chunk_size'",
            title="Invalid preprocessing configuration",
        )
    return ChunkingConfig(size, overlap)


@lru_cache(maxsize=16)
def _splitter(size: int, overlap: int) -> TextSplitter:
    return TextSplitter(size, overlap=overlap)


def content_hash(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


# what `chunk_document` makes chunks with: a new splitter (or a change below) makes new fingerprints
_CHUNKER = f"1:{version('semantic-text-splitter')}"


def source_fingerprint(docs: Iterable[Document], config: ChunkingConfig) -> str | None:
    """A digest of everything `chunk_document` makes these documents' chunks from (`updated_at` aside): the
    same digest, the same chunks. None when a document holds a value JSON cannot hold as it is."""
    parts = [(d.content_column, d.content, d.metadata, d.original_id, d.row_index, d.source) for d in docs]
    if len(parts) > 1:
        parts.sort(key=lambda part: part[0])
    try:
        raw = orjson.dumps(
            (_CHUNKER, config.chunk_size, config.chunk_overlap, parts), option=orjson.OPT_SORT_KEYS
        )
    except TypeError:  # orjson.JSONEncodeError: a key that is not text, an integer past 64 bits, ...
        return None
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def chunk_document(doc: Document, config: ChunkingConfig, updated_at: str) -> list[Chunk]:
    """Split one document. Offsets are character offsets into the document (end exclusive); chunk ids are
    `{doc_id}:{content_column}:{i+1}of{n}:{start}to{end}`. Nothing is truncated: every character of the
    document lands in at least one chunk (whitespace between chunks aside)."""
    content = doc.content
    if (
        len(content) <= config.chunk_size
        and content
        and not content[0].isspace()
        and not content[-1].isspace()
    ):
        # what the splitter returns for a text that fits one chunk with nothing to trim (every character
        # the splitter trims as whitespace is whitespace to `str.isspace` too), without its cost
        pieces = [(0, content)]
    else:
        pieces = list(_splitter(config.chunk_size, config.chunk_overlap).chunk_indices(content))
    if not pieces:
        pieces = [(0, content)]
    n = len(pieces)
    chunks = []
    for i, (start, text) in enumerate(pieces):
        end = start + len(text)
        metadata = {
            **doc.metadata,
            "_chunk_index": i,
            "_content_column": doc.content_column,
            "_start_char": start,
            "_end_char": end,
            "_original_doc_id": doc.original_id,
            "_original_row_index": str(doc.row_index),
            "_source": doc.source,
            "_updated_at": updated_at,
        }
        chunk_id = f"{doc.doc_id}:{doc.content_column}:{i + 1}of{n}:{start}to{end}"
        chunks.append(Chunk(chunk_id, doc.doc_id, text, content_hash(text), metadata))
    return chunks
