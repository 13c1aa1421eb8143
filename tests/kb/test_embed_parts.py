"""An insert's batch is embedded in parts (`ingest.pipeline.EMBED_PART` texts per request, requested at once)
and each part is written as soon as its vectors are back: every chunk gets its own text's vector whichever
part embedded it (or a stored vector of the same text), and a later part that fails (vectors of the wrong
size) leaves nothing of the insert behind. Real PostgreSQL + pgvector; the embedding server is the stub."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
from sqlalchemy import text

from agentkb.ingest.pipeline import EMBED_PART
from agentkb.storage.db import Database
from tests.helpers import assert_problem
from tests.openai_stub import OpenAIStub, stub_vector

P = "/api/projects/mindsdb"
DIM = 8


async def stored(pg_url: str, kb: str) -> dict[str, tuple[str, np.ndarray]]:
    """chunk id -> (content, vector) of the KB's chunks."""
    db = Database(pg_url, pool_size=1)
    try:
        async with db.read() as conn:
            table = await conn.scalar(
                text("SELECT storage_table FROM knowledge_bases WHERE name = :n"), {"n": kb}
            )
            rows = (await conn.execute(text(f"SELECT chunk_id, content, embedding FROM {table}"))).all()
        return {r.chunk_id: (r.content, np.asarray(r.embedding.to_list(), dtype=np.float32)) for r in rows}
    finally:
        await db.close()


def cosine(a: np.ndarray, b: Sequence[float]) -> float:
    v = np.asarray(b, dtype=np.float32)
    return float(a @ v / (np.linalg.norm(a) * np.linalg.norm(v)))


async def test_each_part_writes_its_own_vectors(
    served: Any, client: httpx.Client, pg_url: str, unique: str
) -> None:
    kb = f"parts_{unique}"
    with OpenAIStub(dim=DIM) as stub:
        r = client.post(
            f"{P}/knowledge_bases",
            json={"knowledge_base": {"name": kb, "embedding_model": stub.embedding_model(DIM)}},
        )
        assert r.status_code == 201, r.text
        try:
            first = [{"id": i, "content": f"text {i}"} for i in range(300)]
            assert (
                client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": first}}).status_code
                == 200
            )
            texts_before = stub.texts
            second = [
                *first,  # unchanged
                *(
                    {"id": 1000 + i, "content": f"text {i}"} for i in range(100)
                ),  # stored text: its vector reused
                *({"id": 2000 + i, "content": f"new text {i}"} for i in range(EMBED_PART + 50)),  # two parts
            ]
            r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": second}})
            assert r.status_code == 200, r.text
            assert stub.texts - texts_before == EMBED_PART + 50  # only the new texts were embedded
            chunks = await stored(pg_url, kb)
            assert len(chunks) == 300 + 100 + EMBED_PART + 50
            worst = min(cosine(vector, stub_vector(content, DIM)) for content, vector in chunks.values())
            assert worst > 0.9999, worst
        finally:
            client.delete(f"{P}/knowledge_bases/{kb}")


async def test_a_later_part_of_the_wrong_size_leaves_nothing(
    served: Any, client: httpx.Client, pg_url: str, unique: str
) -> None:
    kb = f"parts_bad_{unique}"

    def embed(texts: list[str]) -> list[list[float]]:  # the batch's last, short part comes back too long
        return [stub_vector(t, DIM if len(texts) == EMBED_PART else DIM + 1) for t in texts]

    with OpenAIStub(embed=embed, dim=DIM) as stub:
        r = client.post(
            f"{P}/knowledge_bases",
            json={"knowledge_base": {"name": kb, "embedding_model": stub.embedding_model(DIM)}},
        )
        assert r.status_code == 201, r.text
        try:
            before = [{"id": i, "content": f"kept {i}"} for i in range(EMBED_PART)]
            assert (
                client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": before}}).status_code
                == 200
            )
            rows = [{"id": 1000 + i, "content": f"text {i}"} for i in range(EMBED_PART + 10)]
            problem = assert_problem(
                client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows}}), 502
            )
            assert f"size {DIM + 1}, expected {DIM}" in problem["detail"], problem
            assert {content for content, _ in (await stored(pg_url, kb)).values()} == {
                r["content"] for r in before
            }
        finally:
            client.delete(f"{P}/knowledge_bases/{kb}")
