"""MindsDB's `preprocessing` applied end to end (real HTTP, real PostgreSQL): `separators` split with MindsDB's
own splitter, `json_chunking` makes MindsDB's JSON chunks, and `contextual` has an LLM (the scripted
OpenAI-compatible stub) write each chunk's context, cached so that unchanged text costs no second call."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentkb.kb.text_splitter import split
from tests.helpers import assert_problem, sql_error, sql_rows
from tests.openai_stub import OpenAIStub, Reply, error

P = "/api/projects/mindsdb"
_CHUNK = re.compile(r"<chunk>\n(.*)\n</chunk>", re.DOTALL)
_PART = re.compile(r"Part: (.*?) \|", re.DOTALL)


def _context(body: dict[str, Any]) -> Reply:
    """The stub LLM's answer: a context naming the first words of the chunk it was asked about."""
    prompt = body["messages"][-1]["content"]
    found = _CHUNK.search(prompt) or _PART.search(prompt)
    return Reply(f"CTX<{found.group(1)[:12] if found else '?'}>")


@pytest.fixture(scope="module")
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub(chat_script=_context) as server:
        yield server


def _create(client: httpx.Client, name: str, stub: OpenAIStub, preprocessing: dict[str, Any]) -> None:
    body = {"name": name, "embedding_model": stub.embedding_model(), "preprocessing": preprocessing}
    r = client.post(f"{P}/knowledge_bases", json={"knowledge_base": body})
    assert r.status_code == 201, r.text


def _insert(client: httpx.Client, kb: str, rows: list[dict[str, Any]], **more: Any) -> httpx.Response:
    return client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows, **more}})


def _chunks(client: httpx.Client, kb: str) -> list[dict[str, Any]]:
    rows = sql_rows(client, f"SELECT chunk_id, chunk_content, metadata FROM {kb} LIMIT 100")
    return sorted(rows, key=lambda r: (r["metadata"]["_original_doc_id"], r["metadata"]["_chunk_index"]))


def _llm(stub: OpenAIStub) -> list[dict[str, Any]]:
    return [r.body for r in stub.requests if r.path.endswith("/chat/completions")]


def _contextual(stub: OpenAIStub, key: str = "ctx-key", **more: Any) -> dict[str, Any]:
    llm = {
        "provider": "openai",
        "model_name": "writer",
        "params": {"api_key": key, "base_url": stub.base_url},
    }
    return {
        "type": "contextual",
        "contextual_config": {"llm_config": llm, "chunk_size": 60, "chunk_overlap": 10, **more},
    }


def test_separators_split_as_mindsdb(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    kb = f"sep_{unique}"
    separators = ["\n\n", "\n", " ", ""]
    config = {"chunk_size": 30, "chunk_overlap": 5, "separators": separators}
    _create(client, kb, stub, {"type": "text_chunking", "text_chunking_config": config})
    text = "alpha beta gamma.\n\ndelta epsilon zeta eta theta.\n\niota kappa"
    assert _insert(client, kb, [{"id": "d", "content": text}]).status_code == 200
    chunks = _chunks(client, kb)
    # MindsDB 26.1's TextSplitter(30, 5, separators) makes these three pieces
    assert [c["chunk_content"] for c in chunks] == [
        "alpha beta gamma.",
        "delta epsilon zeta eta theta.",
        "\niota kappa",
    ]
    assert [(s, p) for s, p in split(text, 30, 5, tuple(separators))] == [
        (int(c["metadata"]["_start_char"]), c["chunk_content"]) for c in chunks
    ]
    assert chunks[1]["chunk_id"] == "d:content:2of3:19to48"


def test_json_chunking_makes_mindsdb_chunks(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    kb = f"json_{unique}"
    _create(
        client, kb, stub, {"type": "json_chunking", "json_chunking_config": {"exclude_fields": ["secret"]}}
    )
    people = [{"name": "Ann", "info": {"age": 3}, "secret": "x"}, {"name": "Bo", "info": {"age": 5}}]
    rows = [{"id": "p", "content": json.dumps(people), "team": "red"}, {"id": "q", "content": "not json"}]
    assert _insert(client, kb, rows).status_code == 200
    chunks = _chunks(client, kb)
    assert [(c["chunk_id"], c["chunk_content"]) for c in chunks] == [
        ("p:content:1of2:0to21", "name: Ann\ninfo.age: 3"),
        ("p:content:2of2:0to20", "name: Bo\ninfo.age: 5"),
        ("q_error", "Error processing document: Content is neither valid JSON nor a valid Python literal."),
    ]
    ann = chunks[0]["metadata"]
    assert ann["field_name"] == "Ann" and ann["field_secret"] == "x" and ann["team"] == "red"
    assert ann["_source"] == "JSONChunkingPreprocessor" and "_start_char" not in ann
    # the field_* metadata filters, as MindsDB's does
    assert sql_rows(client, f"SELECT chunk_content FROM {kb} WHERE field_name = 'Bo'") == [
        {"chunk_content": "name: Bo\ninfo.age: 5"}
    ]


def test_contextual_chunks_get_their_context_once(
    client: httpx.Client, stub: OpenAIStub, unique: str
) -> None:
    kb = f"ctx_{unique}"
    _create(client, kb, stub, _contextual(stub))
    record = client.get(f"{P}/knowledge_bases/{kb}").json()
    assert (
        record["params"]["preprocessing"]["contextual_config"]["llm_config"]["params"]["api_key"] == "******"
    )
    text = "Pelicans keep fish in their pouch. Gulls steal them at sea. Terns dive for their own."
    rows = [{"id": 1, "content": text, "tag": "a"}, {"id": 2, "content": "Herons stand still.", "tag": "b"}]
    stub.reset()
    assert _insert(client, kb, rows).status_code == 200
    asked = _llm(stub)
    chunks = _chunks(client, kb)
    assert len(asked) == len(chunks) >= 3  # one context per chunk, asked together
    for chunk in chunks:
        assert re.fullmatch(r"CTX<.{1,12}>\n\n.+", chunk["chunk_content"], re.DOTALL), chunk
        assert chunk["metadata"]["_source"] == "ContextualPreprocessor"
    prompt = asked[0]["messages"][-1]["content"]
    assert "<document>" in prompt and "Please give a short succinct context" in prompt  # MindsDB's prompt
    assert {r.headers["authorization"] for r in stub.requests if "chat" in r.path} == {"Bearer ctx-key"}
    assert asked[0]["model"] == "writer"

    stub.reset()
    assert _insert(client, kb, rows).status_code == 200  # unchanged: nothing asked, nothing rewritten
    changed = [{**rows[0], "tag": "z"}, rows[1]]
    assert _insert(client, kb, changed).status_code == 200  # new metadata: rewritten, contexts from the cache
    assert _llm(stub) == []
    assert [c["metadata"]["tag"] for c in _chunks(client, kb)][0] == "z"
    assert _insert(client, kb, [{"id": 3, "content": "Storks fly far."}]).status_code == 200
    assert len(_llm(stub)) == 1

    # UPDATE of a chunk's text would need the whole document's context: refused by name
    message = sql_error(client, f"UPDATE {kb} SET content = 'x' WHERE chunk_id = '{chunks[0]['chunk_id']}'")
    assert "contextual" in message


def test_contextual_template_summarize_and_failures(
    client: httpx.Client, stub: OpenAIStub, unique: str
) -> None:
    kb = f"ctxs_{unique}"
    template = "Doc: {WHOLE_DOCUMENT} | Part: {CHUNK_CONTENT} | say where it belongs"
    _create(client, kb, stub, _contextual(stub, context_template=template, summarize=True))
    stub.reset()
    stub.script(error(400, "the model refuses"))  # not retried
    failed = _insert(client, kb, [{"id": 1, "content": "Cranes dance."}])
    assert_problem(failed, 502)
    assert "ctx-key" not in failed.text and sql_rows(client, f"SELECT chunk_id FROM {kb}") == []
    assert _insert(client, kb, [{"id": 1, "content": "Cranes dance."}]).status_code == 200
    [chunk] = _chunks(client, kb)
    assert chunk["chunk_content"] == "CTX<Cranes dance>"  # summarize: the context alone
    assert (
        _llm(stub)[-1]["messages"][-1]["content"]
        == "Doc: Cranes dance. | Part: Cranes dance. | say where it belongs"
    )


def test_contextual_keys_round_trip_and_stay_with_their_server(
    client: httpx.Client, stub: OpenAIStub, unique: str
) -> None:
    kb = f"ctxk_{unique}"
    _create(client, kb, stub, _contextual(stub))
    shown = client.get(f"{P}/knowledge_bases/{kb}").json()["params"]["preprocessing"]
    # the SDKs' read-modify-write: `******` keeps the stored key
    assert (
        client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"preprocessing": shown}}).status_code
        == 200
    )
    stub.reset()
    assert _insert(client, kb, [{"id": 1, "content": "Ibis probe mud."}]).status_code == 200
    assert {r.headers["authorization"] for r in stub.requests if "chat" in r.path} == {"Bearer ctx-key"}
    moved = json.loads(json.dumps(shown))
    moved["contextual_config"]["llm_config"]["params"]["base_url"] = "http://127.0.0.1:9/v1"
    refused = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"preprocessing": moved}})
    assert "api_key" in assert_problem(refused, 400)["detail"]
    # an insert's own preprocessing, with a new key: applied (and stored sealed with the job)
    stub.reset()
    new = _contextual(stub, key="ctx-key-2")
    assert _insert(client, kb, [{"id": 2, "content": "Egrets wade."}], preprocessing=new).status_code == 200
    assert {r.headers["authorization"] for r in stub.requests if "chat" in r.path} == {"Bearer ctx-key-2"}


def test_contextual_needs_an_llm(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    kb = f"ctxn_{unique}"
    _create(client, kb, stub, {"type": "contextual"})  # the server's default model is `extractive`
    refused = _insert(client, kb, [{"id": 1, "content": "Rails hide."}])
    assert "llm_config" in assert_problem(refused, 400)["detail"]
