"""The KB engine end to end over HTTP: insert rows and SQL query results, upsert, search, delete.
Real Postgres+pgvector, the real local embedder, MariaDB and PostgreSQL as data sources."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests import externals
from tests.helpers import assert_problem
from tests.openai_stub import OpenAIStub, Scripted, error, text

P = "/api/projects/mindsdb"

ANIMALS = [
    {
        "id": 1,
        "content": "The cheetah is the fastest land animal, reaching 110 km/h in short bursts.",
        "kind": "mammal",
        "legs": 4,
        "region": "africa",
    },
    {
        "id": 2,
        "content": "Emperor penguins huddle together to survive the Antarctic winter.",
        "kind": "bird",
        "legs": 2,
        "region": "antarctica",
    },
    {
        "id": 3,
        "content": "Octopuses have three hearts and blue blood.",
        "kind": "mollusc",
        "legs": 8,
        "region": "ocean",
    },
    {
        "id": 4,
        "content": "Honey bees communicate the location of flowers with a waggle dance.",
        "kind": "insect",
        "legs": 6,
        "region": "everywhere",
    },
    {
        "id": 5,
        "content": "Elephants can recognise themselves in a mirror and mourn their dead.",
        "kind": "mammal",
        "legs": 4,
        "region": "africa",
    },
]


def create_kb(client: httpx.Client, name: str, **fields: Any) -> dict[str, Any]:
    r = client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": name, **fields}})
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def insert(client: httpx.Client, kb: str, **body: Any) -> dict[str, int]:
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": body})
    assert r.status_code == 200, r.text
    assert r.json() == ""
    return {k: int(v) for k, v in (p.split("=") for p in r.headers["x-agentkb-ingest"].split(", "))}


def search(client: httpx.Client, kb: str, **body: Any) -> list[dict[str, Any]]:
    r = client.post(f"{P}/knowledge_bases/{kb}/search", json=body)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def counts(client: httpx.Client, kb: str) -> tuple[int, int]:
    body = client.get(f"{P}/knowledge_bases/{kb}").json()
    return body["document_count"], body["chunk_count"]


@pytest.fixture()
def animals(client: httpx.Client, unique: str) -> str:
    kb = f"animals_{unique}"
    create_kb(client, kb, metadata_columns=["kind", "legs", "region"])
    stats = insert(client, kb, rows=ANIMALS)
    assert stats["documents"] == 5 and stats["chunks"] == 5 and stats["embedded"] == 5
    return kb


def test_rows_insert_and_search_finds_the_right_chunk(client: httpx.Client, animals: str) -> None:
    hits = search(client, animals, query="which animal runs fastest?")
    assert hits[0]["id"] == 1 and hits[0]["chunk_id"] == "1:content:1of1:0to74"
    assert set(hits[0]) == {"id", "chunk_id", "chunk_content", "metadata", "distance", "relevance"}
    meta = hits[0]["metadata"]
    assert meta["kind"] == "mammal" and meta["legs"] == 4
    for key in (
        "_chunk_index",
        "_content_column",
        "_start_char",
        "_end_char",
        "_original_doc_id",
        "_original_row_index",
        "_source",
        "_updated_at",
    ):
        assert key in meta
    for hit in hits:
        assert 0 < hit["relevance"] <= 1
        assert hit["relevance"] == pytest.approx(1 / (1 + hit["distance"]))
    assert len(hits) == 5 and counts(client, animals) == (5, 5)


def test_metadata_filters(client: httpx.Client, animals: str) -> None:
    def ids(**body: Any) -> set[Any]:
        return {h["id"] for h in search(client, animals, query="animal facts", **body)}

    assert ids(filters={"kind": "mammal"}) == {1, 5}
    assert ids(filters={"kind": ["bird", "insect"]}) == {2, 4}
    assert ids(filters=[{"key": "legs", "op": ">", "value": 4}]) == {3, 4}
    assert ids(filters=[{"key": "legs", "op": "<=", "value": 2}]) == {2}
    assert ids(filters=[{"key": "kind", "op": "!=", "value": "mammal"}]) == {2, 3, 4}
    assert ids(filters=[{"key": "region", "op": "like", "value": "a%"}]) == {1, 2, 5}
    assert ids(filters=[{"key": "id", "op": "in", "value": [3, 4]}]) == {3, 4}
    listing = search(client, animals, filters={"region": "africa"})  # no query: a filtered listing
    assert {h["id"] for h in listing} == {1, 5} and all(h["relevance"] is None for h in listing)


def test_relevance_threshold_and_limit(client: httpx.Client, animals: str) -> None:
    everything = search(client, animals, query="penguins in the cold antarctic winter")
    assert everything[0]["id"] == 2
    cut = everything[0]["relevance"] - 0.01
    kept = search(client, animals, query="penguins in the cold antarctic winter", relevance_threshold=cut)
    assert [h["id"] for h in kept] == [h["id"] for h in everything if h["relevance"] >= cut]
    assert kept and len(kept) < len(everything)
    assert len(search(client, animals, query="animals", limit=2)) == 2


def test_reinsert_costs_no_embeddings_and_upsert_replaces(client: httpx.Client, animals: str) -> None:
    again = insert(client, animals, rows=ANIMALS)
    assert again["unchanged"] == 5 and again["embedded"] == 0 and again["written"] == 0
    changed = [
        dict(ANIMALS[2], content="Octopuses can change colour in milliseconds to hide from predators.")
    ]
    stats = insert(client, animals, rows=changed)
    assert stats["embedded"] == 1 and stats["deleted"] == 1 and stats["written"] == 1
    assert counts(client, animals) == (5, 5)
    top = search(client, animals, query="camouflage by changing colour")[0]
    assert top["id"] == 3 and "milliseconds" in top["chunk_content"]
    hearts = search(client, animals, query="three hearts and blue blood")
    assert all("three hearts" not in h["chunk_content"] for h in hearts)  # old chunk gone


def test_long_text_is_chunked_not_truncated(client: httpx.Client, unique: str) -> None:
    kb = f"long_{unique}"
    create_kb(client, kb, params={"chunk_size": 300, "chunk_overlap": 50})
    text = " ".join(f"Paragraph {i} talks about topic number {i} in some detail." for i in range(60))
    stats = insert(client, kb, rows=[{"id": "book", "content": text}])
    chunks = search(client, kb, filters={"id": "book"})
    assert stats["chunks"] == len(chunks) >= 8
    covered = sorted((h["metadata"]["_start_char"], h["metadata"]["_end_char"]) for h in chunks)
    assert covered[0][0] == 0 and covered[-1][1] == len(text)
    for a, b in zip(
        covered, covered[1:], strict=False
    ):  # nothing but whitespace falls between consecutive chunks
        assert b[0] <= a[1] or not text[a[1] : b[0]].strip()


def test_hybrid_beats_vector_only_on_exact_keyword(client: httpx.Client, unique: str) -> None:
    kb = f"codes_{unique}"
    create_kb(client, kb)
    rows = [
        {"id": i, "content": f"Printer fault {code}: {text}"}
        for i, (code, text) in enumerate(
            [
                ("E100", "the paper tray is empty; refill it and press resume."),
                ("E200", "a sheet of paper is jammed near the rear roller."),
                ("E300", "the toner cartridge is nearly used up and should be replaced soon."),
                ("E400", "the fuser unit overheated; switch the printer off for ten minutes."),
                ("E500", "the firmware signature check failed after an interrupted update."),
                ("E600", "the network card lost its connection to the print server."),
            ]
        )
    ]
    insert(client, kb, rows=rows)
    # all-MiniLM-L6-v2 puts "E400" nearer the E500 and E300 texts; the lexical side (BM25) knows the token.
    vector = [h["id"] for h in search(client, kb, query="E400", hybrid_search=False)]
    hybrid = [h["id"] for h in search(client, kb, query="E400")]
    assert hybrid[0] == 3
    assert vector[0] != 3

    # SQL is MindsDB's: `content = …` alone is the vector search, best first; `hybrid_search = true` fuses
    def sql_hits(where: str) -> list[dict[str, Any]]:
        r = client.post(
            "/api/sql/query",
            json={"query": f"SELECT id, relevance FROM {kb} WHERE {where}", "context": {"db": "mindsdb"}},
        )
        assert r.status_code == 200 and r.json()["type"] == "table", r.text
        return [dict(zip(r.json()["column_names"], row, strict=True)) for row in r.json()["data"]]

    plain = sql_hits("content = 'E400'")
    assert [int(h["id"]) for h in plain] == vector
    relevance = [h["relevance"] for h in plain]
    assert relevance == sorted(relevance, reverse=True)
    assert [int(h["id"]) for h in sql_hits("content = 'E400' AND hybrid_search = true")] == hybrid
    assert [int(h["id"]) for h in sql_hits("content = 'E400' AND hybrid_search_alpha = 0.5")] == hybrid


def test_delete_documents_by_id_and_filter(client: httpx.Client, animals: str) -> None:
    r = client.request("DELETE", f"{P}/knowledge_bases/{animals}", json={"ids": [1]})
    assert r.status_code == 200 and r.json() == {"deleted_documents": 1, "deleted_chunks": 1}
    r = client.request("DELETE", f"{P}/knowledge_bases/{animals}", json={"filters": {"kind": "mammal"}})
    assert r.json() == {"deleted_documents": 1, "deleted_chunks": 1}
    assert counts(client, animals) == (3, 3)
    assert_problem(client.request("DELETE", f"{P}/knowledge_bases/{animals}", json={"nope": 1}), 400)


def test_bad_inserts_change_nothing(client: httpx.Client, animals: str) -> None:
    url = f"{P}/knowledge_bases/{animals}"
    bad: list[tuple[dict[str, Any], int, str]] = [
        ({"rows": [{"id": 9, "content": "fine row"}, {"id": 10, "kind": "no content"}]}, 400, "Row 1"),
        ({"rows": ["not an object"]}, 400, "rows"),
        ({"rows": [{}]}, 400, "Row 0"),
        ({"rows": []}, 400, "empty"),
        ({}, 400, "Nothing to insert"),
        ({"query": "DELETE FROM pg.t"}, 400, "SELECT"),
        ({"query": "SELECT * FROM no_such_source.t"}, 400, "no_such_source"),
        ({"rows": [{"id": 9, "content": "x"}], "params": {"chunk_size": 0}}, 400, "chunk_size"),
    ]
    for body, status, needle in bad:
        problem = assert_problem(client.put(url, json={"knowledge_base": body}), status)
        assert needle in problem["detail"], (body, problem)
    assert counts(client, animals) == (5, 5)
    assert_problem(
        client.put(f"{P}/knowledge_bases/missing_kb", json={"knowledge_base": {"rows": ANIMALS}}), 404
    )
    assert_problem(
        client.put("/api/projects/nope/knowledge_bases/x", json={"knowledge_base": {"rows": ANIMALS}}), 404
    )


@pytest.fixture()
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub(dim=16) as server:
        yield server


def stub_embedder(stub: OpenAIStub, api_key: str) -> dict[str, Any]:
    """An `embedding_model` that embeds with the OpenAI stub `stub` (16 dimensions), sending `api_key`."""
    return {
        "provider": "openai",
        "model_name": "stub-embed",
        "base_url": stub.url,
        "api_key": api_key,
        "dimensions": 16,
    }


def test_openai_compatible_embedder_with_retry(client: httpx.Client, unique: str, stub: OpenAIStub) -> None:
    kb = f"remote_{unique}"
    create_kb(
        client,
        kb,
        embedding_model=stub_embedder(stub, "sk-remote"),
    )
    stub.script_embeddings(Scripted(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}))
    stats = insert(client, kb, rows=ANIMALS[:3])
    assert stats["embedded"] == 3
    assert len(stub.requests) == 2  # the 429, then the retry
    assert stub.requests[-1].headers.get("authorization") == "Bearer sk-remote"
    assert counts(client, kb) == (3, 3)


def test_embedding_provider_down_is_502_and_nothing_written(
    client: httpx.Client, unique: str, stub: OpenAIStub
) -> None:
    kb = f"down_{unique}"
    create_kb(
        client,
        kb,
        embedding_model=stub_embedder(stub, "k"),
    )
    stub.script_embeddings(Scripted(400, {"error": {"message": "model overloaded"}}))
    many = [{"id": i, "content": f"document number {i}"} for i in range(300)]  # two batches
    problem = assert_problem(
        client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": many}}), 502
    )
    assert "model overloaded" in problem["detail"]
    assert counts(client, kb) == (0, 0)


@pytest.fixture()
def sources(
    client: httpx.Client, unique: str, mariadb: dict[str, Any], pg_source: dict[str, Any]
) -> Iterator[tuple[str, str]]:
    """Data sources `maria_<unique>` and `pg_<unique>`, each with a table `notes_<unique>`."""
    table, columns = f"notes_{unique}", "id INT PRIMARY KEY, body TEXT, topic VARCHAR(20)"
    rows = [
        (1, "The rocket launch was delayed by high winds.", "space"),
        (2, "Sourdough bread needs a lively starter and a long proof.", "baking"),
    ]
    maria, pg = f"maria_{unique}", f"pg_{unique}"
    with (
        externals.table("mariadb", mariadb, table, columns, rows),
        externals.table("postgres", pg_source, table, columns, [(i + 10, b, t) for i, b, t in rows]),
    ):
        for name, engine, params in ((maria, "mariadb", mariadb), (pg, "postgres", pg_source)):
            database = {"name": name, "engine": engine, "parameters": params}
            r = client.post("/api/databases", json={"database": database})
            assert r.status_code == 201, r.text
        yield maria, pg
        for name in (maria, pg):
            client.delete(f"/api/databases/{name}")


def test_insert_from_mariadb_and_postgres_queries(
    client: httpx.Client, unique: str, sources: tuple[str, str]
) -> None:
    maria, pg = sources
    kb = f"notes_kb_{unique}"
    create_kb(client, kb, content_columns=["body"], metadata_columns=["topic"])
    insert(client, kb, query=f"SELECT id, body, topic FROM {maria}.notes_{unique} WHERE id = 1")
    stats = insert(
        client,
        kb,
        query=f"SELECT id, body, topic FROM {pg}.notes_{unique}",
        rows=[{"id": 99, "body": "A row sent beside the query.", "topic": "misc"}],
    )
    assert stats["documents"] == 3
    assert counts(client, kb) == (4, 4)
    top = search(client, kb, query="baking bread at home", limit=1)[0]
    assert top["id"] == 12 and top["metadata"]["topic"] == "baking"
    top = search(client, kb, query="space launch weather", filters={"topic": "space"})
    assert {h["id"] for h in top} == {1, 11}


def test_llm_reranking(client: httpx.Client, unique: str) -> None:
    with OpenAIStub() as llm:
        kb = f"rerank_{unique}"
        create_kb(
            client,
            kb,
            reranking_model={
                "provider": "openai",
                "model_name": "judge",
                "api_key": "sk-r",
                "base_url": llm.base_url,
            },
        )
        insert(client, kb, rows=ANIMALS)
        llm.script(text('{"scores": [0.1, 0.9, 0.2, 0.95, 0.3]}'))
        hits = search(client, kb, query="animals that live in groups", limit=5)
        prompt = llm.requests[-1].body["messages"][0]["content"]
        order = [line.split(": ", 1)[1] for line in prompt.splitlines() if line.startswith("Passage ")]
        by_text = {a["content"]: a["id"] for a in ANIMALS}
        ranked = [by_text[order[i]] for i in (3, 1)]  # the passages scored 0.95 and 0.9, best first
        assert [h["id"] for h in hits] == ranked  # below the 0.5 default threshold: dropped
        assert [h["relevance"] for h in hits] == [0.95, 0.9]
        assert llm.requests[-1].headers["authorization"] == "Bearer sk-r"
        assert len(search(client, kb, query="animals", reranking=False)) == 5  # opt out per query
        llm.script(error(500, "judge is down"))
        r = client.post(f"{P}/knowledge_bases/{kb}/search", json={"query": "animals"})
        assert_problem(r, 502)
