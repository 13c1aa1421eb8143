"""Ported from MindsDB `tests/unit/api/http/knowledge_bases_test.py` @v26.1.0.

Adaptations: MindsDB first creates a `duckdb_faiss` database `kb_vector_db` for the KB's storage (not ported:
agentkb keeps chunks in its own PostgreSQL, and refuses `storage` with a 400 naming it, so the body leaves it
out). The patched `LLMClient` (the embedder) is MindsDB's dummy embedder served over HTTP
(tests/compat/mdb.py), so "the embedder was built with the new key" is read from the Authorization header of
the first embedding request after the update.
"""

from __future__ import annotations

from http import HTTPStatus

import httpx

from tests.compat.mdb import MindsDBEmbeddings


def test_update_kb_embeddings(client: httpx.Client, mdb_embeddings: MindsDBEmbeddings) -> None:
    """Origin: test_update_kb_embeddings (MindsDB @v26.1.0). The embedding model is MindsDB's
    (`gemini`, `dummy_model`, `embed-key-1`) served by the stub (`provider: openai`, `base_url`)."""
    create_response = client.post(
        "/api/projects/mindsdb/knowledge_bases",
        follow_redirects=True,
        json={
            "knowledge_base": {
                "name": "test_kb",
                # adaptation: no "storage": {"database": "kb_vector_db", "table": "default_collection"}
                "params": {
                    "embedding_model": mdb_embeddings.mindsdb_model(
                        model_name="dummy_model", api_key="embed-key-1"
                    ),
                },
            }
        },
    )
    assert create_response.status_code == HTTPStatus.CREATED, create_response.text

    mdb_embeddings.reset()  # mock_embedding.reset_mock()
    update_response = client.put(
        "/api/projects/mindsdb/knowledge_bases/test_kb",
        json={
            "knowledge_base": {
                "params": {
                    "embedding_model": {
                        "api_key": "embed-key-2",
                    }
                }
            }
        },
        follow_redirects=True,
    )

    assert update_response.status_code == HTTPStatus.OK
    if not mdb_embeddings.requests:  # agentkb need not call the embedder on update: make it embed something
        inserted = client.put(
            "/api/projects/mindsdb/knowledge_bases/test_kb",
            json={"knowledge_base": {"rows": [{"id": 1, "content": "hello"}]}},
        )
        assert inserted.status_code == HTTPStatus.OK, inserted.text
    kwargs = mdb_embeddings.requests[0].headers
    assert kwargs["authorization"] == "Bearer embed-key-2"
