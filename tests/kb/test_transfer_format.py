"""The export file's pure parts: secrets left out by path and put back, and a written file read back."""

from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pytest

from agentkb.errors import BadRequest
from agentkb.kb.transfer import ExportEncoder, ExportReader, put_secrets, strip_secrets


def test_secrets_are_left_out_by_path_and_put_back() -> None:
    definition = {
        "embedding_model": {"provider": "openai", "api_key": "sk-abc", "base_url": "https://x/v1"},
        "reranking_model": None,
        "params": {
            "headers": [{"name": "h", "token": "t0k"}],
            "source": "postgresql://u:pw@db/x",
            "note": "enc:v1:0123abcd:Z0FBQUFB",
            "max_tokens": 5,
        },
    }
    clean, omitted = strip_secrets(definition)
    assert omitted == ["embedding_model.api_key", "params.headers.0.token", "params.source", "params.note"]
    assert clean["embedding_model"] == {"provider": "openai", "base_url": "https://x/v1"}
    assert clean["params"] == {"headers": [{"name": "h"}], "max_tokens": 5}

    with pytest.raises(BadRequest, match="embedding_model.api_key, params.headers.0.token"):
        put_secrets(clean, omitted, {"params.source": "x", "params.note": "y"})
    given = {
        "embedding_model.api_key": "sk-new",
        "params.headers.0.token": "t1",
        "params.source": "postgresql://u:pw2@db/x",
        "params.note": "n",
    }
    restored = put_secrets(clean, omitted, given)
    assert restored["embedding_model"]["api_key"] == "sk-new"
    assert restored["params"]["headers"][0] == {"name": "h", "token": "t1"}
    assert "api_key" not in clean["embedding_model"]  # a copy, not the original
    with pytest.raises(BadRequest, match="does not name a field"):
        put_secrets(clean, [], {"reranking_model.api_key": "k"})  # no reranking model to give a key to


def test_a_written_file_reads_back_exactly() -> None:
    rng = np.random.default_rng(1)
    rows = [
        SimpleNamespace(
            chunk_id=f"d{i}:{i}",
            doc_id=f"d{i}",
            content=f"text {i} ✓",
            content_hash=f"h{i}",
            metadata={"i": i},
            embedding=rng.normal(size=5).astype(np.float32),
        )
        for i in range(2500)
    ]
    encoder = ExportEncoder()
    definition = {"name": "kb", "embedding_model": {"provider": "local"}, "params": {}, "vector_dim": 5}
    data = encoder.header(definition, [], chunks=len(rows))
    for start in range(0, len(rows), 1000):
        data += encoder.chunk_rows(rows[start : start + 1000])
    data += encoder.end()

    reader = ExportReader(io.BytesIO(data))
    header = reader.read_header()
    assert header.vector_dim == 5 and header.chunks == 2500 and header.secrets_omitted == []
    read = []
    while batch := reader.read_chunks(1000):
        assert len(batch) <= 1000
        read += batch
    assert reader.ended and len(read) == 2500
    for row, record in zip(rows, read, strict=True):
        assert (record.chunk_id, record.doc_id, record.content, record.metadata) == (
            row.chunk_id,
            row.doc_id,
            row.content,
            row.metadata,
        )
        assert record.embedding.dtype == np.float32
        assert np.array_equal(record.embedding, row.embedding)  # bit for bit
