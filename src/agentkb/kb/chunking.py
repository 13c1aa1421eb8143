"""Documents → chunks, with MindsDB's chunk ids and bookkeeping metadata: by default with
semantic-text-splitter; with `separators`, MindsDB's own splitter (`kb.text_splitter`); JSON documents by
MindsDB's JSON chunker (`kb.json_chunking`). Contextual chunks are split here and get their context from an
LLM in the ingest pipeline (`ingest.pipeline.ChunkContexts`). The settings: `kb.preprocessing`."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

import orjson

from agentkb.kb import text_splitter
from agentkb.kb.documents import ROWS_SOURCE, Document, json_safe
from agentkb.kb.json_chunking import JSONChunker
from agentkb.kb.preprocessing import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    JSON,
    MAX_CHUNK_SIZE,
    SOURCES,
    ChunkingConfig,
    chunking_config,
)

__all__ = [
    "DEFAULT_CHUNK_OVERLAP",
    "DEFAULT_CHUNK_SIZE",
    "MAX_CHUNK_SIZE",
    "Chunk",
    "ChunkingConfig",
    "chunk_document",
    "chunking_config",
    "content_hash",
    "source_fingerprint",
]

if TYPE_CHECKING:
    from semantic_text_splitter import TextSplitter


# not frozen, as `kb.documents.Document` says why; contextual chunking rewrites `content` and `content_hash`
@dataclass(slots=True)
class Chunk:
    chunk_id: str
    doc_id: str
    content: str
    content_hash: str
    metadata: dict[str, Any]


@lru_cache(maxsize=16)
def _splitter(size: int, overlap: int) -> TextSplitter:
    from semantic_text_splitter import TextSplitter  # imported with the first document chunked

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
    settings: tuple[Any, ...] = (_CHUNKER, config.chunk_size, config.chunk_overlap, parts)
    if not config.default:  # the default's digests predate the other kinds: they stay as they were
        settings = (*settings, config.describe())
    try:
        raw = orjson.dumps(settings, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError: a key that is not text, an integer past 64 bits, ...
        return None
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def _metadata(doc: Document, config: ChunkingConfig, updated_at: str) -> dict[str, Any]:
    """The bookkeeping metadata every chunk of `doc` carries (rows and SQL inserts name the chunker, as
    MindsDB's `_source`; files and pages name themselves)."""
    return {
        "_content_column": doc.content_column,
        "_original_doc_id": doc.original_id,
        "_original_row_index": str(doc.row_index),
        "_source": SOURCES[config.kind] if doc.source == ROWS_SOURCE else doc.source,
        "_updated_at": updated_at,
    }


def _text_pieces(content: str, config: ChunkingConfig) -> tuple[list[tuple[int, int, str]], int]:
    """(pieces as (index, offset, text), how many pieces the chunk ids count)."""
    if config.separators is not None:  # MindsDB's splitter: blank pieces counted, then skipped, as MindsDB
        pieces = text_splitter.split(content, config.chunk_size, config.chunk_overlap, config.separators)
        return [(i, start, text) for i, (start, text) in enumerate(pieces) if text.strip()], len(pieces)
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
    return [(i, start, text) for i, (start, text) in enumerate(pieces)], len(pieces)


def _json_chunks(doc: Document, config: ChunkingConfig, updated_at: str) -> list[Chunk]:
    """MindsDB's JSON chunks of `doc`: its chunk ids and `field_*` metadata (no character offsets).
    `include_metadata = false` leaves the row's metadata columns out (MindsDB documents the option but
    never reads it)."""
    assert config.json is not None
    base = _metadata(doc, config, updated_at)
    own = doc.metadata if config.json.include_metadata else {}
    chunks = []
    for piece in JSONChunker(config.json).pieces(doc.doc_id, doc.content):
        extra = {str(k): json_safe(v) for k, v in piece.metadata.items()}
        metadata = {**own, **base, "_chunk_index": piece.index, **extra}
        chunks.append(Chunk(piece.chunk_id, doc.doc_id, piece.content, content_hash(piece.content), metadata))
    return chunks


def chunk_document(doc: Document, config: ChunkingConfig, updated_at: str) -> list[Chunk]:
    """Split one document. Offsets are character offsets into the document (end exclusive); chunk ids are
    `{doc_id}:{content_column}:{i+1}of{n}:{start}to{end}`. Nothing is truncated: every character of the
    document lands in at least one chunk (whitespace between chunks aside). JSON chunking: MindsDB's ids,
    `{doc_id}:{json content_column}:{i+1}of{n}:0to{length}`."""
    if config.kind == JSON:
        return _json_chunks(doc, config, updated_at)
    pieces, n = _text_pieces(doc.content, config)
    base = _metadata(doc, config, updated_at)
    chunks = []
    for i, start, text in pieces:
        end = start + len(text)
        metadata = {**doc.metadata, "_chunk_index": i, "_start_char": start, "_end_char": end, **base}
        chunk_id = f"{doc.doc_id}:{doc.content_column}:{i + 1}of{n}:{start}to{end}"
        chunks.append(Chunk(chunk_id, doc.doc_id, text, content_hash(text), metadata))
    return chunks
