"""Rows → documents → chunks: MindsDB's column rules, chunk ids and bookkeeping metadata (pure code)."""

from __future__ import annotations

import random

import pytest

from agentkb.errors import BadRequest
from agentkb.kb.chunking import ChunkingConfig, _splitter, chunk_document, chunking_config
from agentkb.kb.documents import ColumnSpec, Document, content_id, row_documents
from agentkb.kb.search import fuse
from agentkb.storage.chunk_search import Row


def test_default_columns_follow_mindsdb() -> None:
    rows = [{"id": 7, "content": "hello world", "author": "ann", "extra": {"lang": "en"}}]
    [doc] = row_documents(rows, ColumnSpec())
    assert doc.doc_id == "7" and doc.original_id == 7 and doc.content_column == "content"
    assert doc.metadata == {"author": "ann", "lang": "en"}  # dict values merged, as MindsDB does


def test_declared_columns_and_id_column() -> None:
    spec = ColumnSpec(id_column="sku", content_columns=("title", "body"), metadata_columns=("brand",))
    docs = list(
        row_documents([{"sku": "A1", "title": "Lamp", "body": "A bright lamp", "brand": "X", "x": 1}], spec)
    )
    assert [(d.doc_id, d.content_column, d.content) for d in docs] == [
        ("A1", "title", "Lamp"),
        ("A1", "body", "A bright lamp"),
    ]
    assert docs[0].metadata == {"brand": "X"}


def test_metadata_columns_make_the_rest_content() -> None:
    [doc] = row_documents([{"note": "text here", "author": "bo"}], ColumnSpec(metadata_columns=("author",)))
    assert doc.content_column == "note" and doc.metadata == {"author": "bo"}
    assert doc.doc_id == content_id("text here") and len(doc.doc_id) == 16


@pytest.mark.parametrize(
    "rows, message",
    [
        ([{"id": 1, "content": "ok"}, {"id": 2}], "Row 1"),
        ([{"content": "ok"}, "not a row"], "Row 1 must be"),
        ([{}], "Row 0 must be"),
    ],
)
def test_bad_rows(rows: list[object], message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        list(row_documents(rows, ColumnSpec()))  # type: ignore[arg-type]


def test_empty_content_cells_make_no_document() -> None:
    docs = list(
        row_documents(
            [{"id": 1, "content": None}, {"id": 2, "content": "  "}, {"id": 3, "content": "x"}], ColumnSpec()
        )
    )
    assert [d.doc_id for d in docs] == ["3"]


def test_missing_declared_content_columns() -> None:
    with pytest.raises(BadRequest, match="Content columns"):
        list(row_documents([{"x": "y"}], ColumnSpec(content_columns=("body",))))


def test_chunk_ids_offsets_and_metadata() -> None:
    text = "Sentence number one is here. " * 80  # ~2,300 chars -> several chunks
    [doc] = row_documents([{"id": "D1", "body": text, "tag": "t"}], ColumnSpec(content_columns=("body",)))
    chunks = chunk_document(doc, ChunkingConfig(500, 100), "2026-01-01 00:00:00")
    n = len(chunks)
    assert n >= 5
    for i, chunk in enumerate(chunks):
        meta = chunk.metadata
        start, end = meta["_start_char"], meta["_end_char"]
        assert text[start:end] == chunk.content
        assert len(chunk.content) <= 500
        assert chunk.chunk_id == f"D1:body:{i + 1}of{n}:{start}to{end}"
        assert meta["_chunk_index"] == i and meta["_content_column"] == "body"
        assert meta["_original_doc_id"] == "D1" and meta["_original_row_index"] == "0"
        assert meta["_source"] == "TextChunkingPreprocessor" and meta["_updated_at"] == "2026-01-01 00:00:00"
        assert meta["tag"] == "t"
    assert chunks[0].metadata["_start_char"] == 0 and chunks[-1].metadata["_end_char"] == len(text.rstrip())
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.metadata["_start_char"] < a.metadata["_end_char"]  # overlapping, nothing dropped


def test_small_text_is_one_chunk_like_mindsdb_example() -> None:
    [doc] = row_documents([{"id": "A1B", "notes": "x" * 20}], ColumnSpec(content_columns=("notes",)))
    [chunk] = chunk_document(doc, ChunkingConfig(), "t")
    assert chunk.chunk_id == "A1B:notes:1of1:0to20"


@pytest.mark.parametrize(
    "params, expected",
    [
        ({}, ChunkingConfig(1000, 200)),
        ({"chunk_size": 300, "chunk_overlap": 30}, ChunkingConfig(300, 30)),
        (
            {"preprocessing": {"text_chunking_config": {"chunk_size": 400, "chunk_overlap": 0}}},
            ChunkingConfig(400, 0),
        ),
    ],
)
def test_chunking_config(params: dict[str, object], expected: ChunkingConfig) -> None:
    assert chunking_config(params) == expected


@pytest.mark.parametrize(
    "params", [{"chunk_size": 0}, {"chunk_size": 100, "chunk_overlap": 100}, {"chunk_size": "big"}]
)
def test_bad_chunking_config(params: dict[str, object]) -> None:
    with pytest.raises(BadRequest):
        chunking_config(params)


def _row(cid: str, distance: float = 0.5) -> Row:
    return Row(cid, cid, cid, {}, distance)


def test_rrf_fusion_rewards_agreement() -> None:
    vector = [_row("a"), _row("b"), _row("c")]
    text = [_row("c"), _row("d")]
    fused = [row.chunk_id for row, _ in fuse([(0.5, vector), (0.5, text)], k=60)]
    assert fused[0] == "c"  # in both lists
    assert set(fused) == {"a", "b", "c", "d"}
    vector_only = [row.chunk_id for row, _ in fuse([(1.0, vector), (0.0, text)], k=60)]
    assert vector_only == ["a", "b", "c"]


def test_a_text_that_fits_one_chunk_is_chunked_as_the_splitter_does() -> None:
    """Texts that fit one chunk skip the splitter: the pieces are the splitter's own, whitespace of every
    kind (Unicode spaces, control separators) at either end and inside included."""
    rng = random.Random(3)
    alphabet = "ab c\n\t\u00a0\u3000\u2028é😀.\x1c\u0085,"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        for size in (5, 30):
            config = ChunkingConfig(size, 0)
            expected = list(_splitter(size, 0).chunk_indices(text)) or [(0, text)]
            got = [
                (c.metadata["_start_char"], c.content)
                for c in chunk_document(Document("d", "d", "c", text), config, "")
            ]
            assert got == expected, (text, size)
