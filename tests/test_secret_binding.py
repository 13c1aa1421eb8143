"""A stored secret is sent only to the endpoint it was given with (`secrecy.binding`), over HTTP.

Two OpenAI-compatible stubs: `home`, the server each key was given for, and `away`, the server an update
points to. Every hostile update (a changed `base_url`, `host`, `database` or provider without the secret
sent again) is a 400 naming the secret to send; nothing stored changes and `away` never receives the
stored key. Sending the secret again with the new endpoint works, and the new key goes to the new server.
Changes that touch no endpoint keep the stored secrets (`******` round trips).
"""

from __future__ import annotations

import gzip
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import psycopg
import pytest

from tests import externals
from tests.helpers import assert_problem
from tests.openai_stub import OpenAIStub, Reply, text
from tests.secret_helpers import fresh_database, libpq

P = "/api/projects/mindsdb"
MASK = "******"
RESEND = "a stored secret is only sent to the server it was given for"


def _scores(body: dict[str, Any]) -> Reply:
    """A reranker's answer (one score a passage), or a plain chat answer."""
    content = str(body["messages"][-1].get("content") or "")
    passages = content.count("\nPassage ") + content.startswith("Passage ")
    if "Rate how well each passage" in content:
        return text(json.dumps({"scores": [0.9] * max(passages, 1)}))
    return text("an answer")


@pytest.fixture(scope="module")
def home() -> Iterator[OpenAIStub]:
    with OpenAIStub(chat_script=_scores) as server:
        yield server


@pytest.fixture(scope="module")
def away() -> Iterator[OpenAIStub]:
    with OpenAIStub(chat_script=_scores) as server:
        yield server


def _keys(stub: OpenAIStub) -> set[str]:
    return {r.headers.get("authorization", "") for r in stub.requests}


def _key(u: str, what: str) -> str:
    return f"sk-{what}-{u}-0123456789"


def _sql(client: httpx.Client, query: str) -> dict[str, Any]:
    r = client.post("/api/sql/query", json={"query": query, "context": {"db": "mindsdb"}})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def _obj(value: dict[str, Any]) -> str:
    """A SQL object literal (MindsDB's `{'key': 'value'}`)."""
    return (
        "{"
        + ", ".join(f"'{k}': " + (f"'{v}'" if isinstance(v, str) else str(v)) for k, v in value.items())
        + "}"
    )


def _sql_refused(client: httpx.Client, query: str, *secrets: str) -> None:
    answer = _sql(client, query)
    assert answer["type"] == "error", answer
    assert RESEND in answer["error_message"], answer
    for secret in secrets:
        assert f"'{secret}'" in answer["error_message"], answer


def _refused(response: httpx.Response, *secrets: str) -> None:
    body = assert_problem(response, 400)
    assert body["title"] == "Secret must be sent again" and RESEND in body["detail"], body
    for secret in secrets:
        assert f"'{secret}'" in body["detail"], body


def _search(client: httpx.Client, kb: str, **extra: Any) -> None:
    r = client.post(f"{P}/knowledge_bases/{kb}/search", json={"query": "otters", **extra})
    assert r.status_code == 200, r.text


def _model(stub: OpenAIStub, key: str, **extra: Any) -> dict[str, Any]:
    return {"provider": "openai", "model_name": "stub", "base_url": stub.base_url, "api_key": key, **extra}


ROWS = [{"id": 1, "content": "Otters hold hands."}, {"id": 2, "content": "Crows remember faces."}]


def _kb(client: httpx.Client, name: str, embedding: dict[str, Any], reranking: Any = False) -> None:
    body = {"name": name, "embedding_model": embedding, "reranking_model": reranking}
    r = client.post(f"{P}/knowledge_bases", json={"knowledge_base": body})
    assert r.status_code == 201, r.text
    r = client.put(f"{P}/knowledge_bases/{name}", json={"knowledge_base": {"rows": ROWS}})
    assert r.status_code == 200, r.text


# --- knowledge bases ----------------------------------------------------------------------------------


def test_kb_embedding_model_moved_by_alter_or_put(
    client: httpx.Client, home: OpenAIStub, away: OpenAIStub, unique: str
) -> None:
    kb, old, new = f"bind_emb_{unique}", _key(unique, "emb-home"), _key(unique, "emb-away")
    _kb(client, kb, _model(home, old, dimensions=8))
    home.reset()
    away.reset()
    for given in ({"base_url": away.base_url}, {"base_url": away.base_url, "api_key": MASK}):
        _sql_refused(
            client,
            f"ALTER KNOWLEDGE_BASE {kb} USING embedding_model = {_obj(given)}",
            "embedding_model.api_key",
        )
        put = client.put(
            f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"params": {"embedding_model": given}}}
        )
        _refused(put, "embedding_model.api_key")
        documented = client.put(  # MindsDB's documented ALTER body: the model beside the data
            f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"embedding_model": given}}
        )
        _refused(documented, "embedding_model.api_key")
    # an insert carrying the same change: refused before any job is queued, nothing inserted
    more = {
        "rows": [{"id": 3, "content": "Bees dance."}],
        "params": {"embedding_model": {"base_url": away.base_url}},
    }
    _refused(
        client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": more}), "embedding_model.api_key"
    )
    queued = client.put(f"{P}/knowledge_bases/{kb}", params={"async": "true"}, json={"knowledge_base": more})
    _refused(queued, "embedding_model.api_key")
    record = client.get(f"{P}/knowledge_bases/{kb}").json()
    assert record["embedding_model"]["base_url"] == home.base_url and record["document_count"] == 2, record
    assert away.requests == [] and _keys(home) <= {f"Bearer {old}"}

    # a change of no endpoint keeps the stored key
    kept = {"api_key": MASK, "timeout": 30}
    put = client.put(
        f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"params": {"embedding_model": kept}}}
    )
    assert put.status_code == 200, put.text
    home.reset()
    _search(client, kb)
    assert _keys(home) == {f"Bearer {old}"} and away.requests == []

    # the key sent again with the new server: the new key goes there, the old one never
    moved = {"base_url": away.base_url, "api_key": new}
    assert _sql(client, f"ALTER KNOWLEDGE_BASE {kb} USING embedding_model = {_obj(moved)}")["type"] == "ok"
    home.reset()
    _search(client, kb)
    assert _keys(away) == {f"Bearer {new}"} and home.requests == []
    client.delete(f"{P}/knowledge_bases/{kb}")


def test_kb_reranking_model_moved_or_another_provider(
    client: httpx.Client, home: OpenAIStub, away: OpenAIStub, unique: str
) -> None:
    kb, old, new = f"bind_rr_{unique}", _key(unique, "rr-home"), _key(unique, "rr-away")
    embed = _model(home, _key(unique, "rr-emb"), dimensions=8)
    _kb(
        client,
        kb,
        embed,
        {"provider": "openai", "model_name": "judge", "base_url": home.base_url, "api_key": old},
    )
    away.reset()
    for given in (
        {"base_url": away.base_url},
        {"base_url": away.base_url, "api_key": MASK},
        {"provider": "ollama", "model_name": "judge", "api_key": MASK},  # another provider keeps no secret
    ):
        put = client.put(
            f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"params": {"reranking_model": given}}}
        )
        _refused(put, "reranking_model.api_key")
    _sql_refused(
        client,
        f"ALTER KNOWLEDGE_BASE {kb} USING reranking_model = {_obj({'base_url': away.base_url})}",
        "reranking_model.api_key",
    )
    assert client.get(f"{P}/knowledge_bases/{kb}").json()["reranking_model"]["base_url"] == home.base_url
    home.reset()
    _search(client, kb)
    chat = [r for r in home.requests if r.path.endswith("/chat/completions")]
    assert {r.headers["authorization"] for r in chat} == {f"Bearer {old}"} and away.requests == []

    kept = {"api_key": MASK, "filtering_threshold": 0.1}
    put = client.put(
        f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"params": {"reranking_model": kept}}}
    )
    assert put.status_code == 200, put.text
    moved = {"base_url": away.base_url, "api_key": new}
    put = client.put(
        f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"params": {"reranking_model": moved}}}
    )
    assert put.status_code == 200, put.text
    home.reset()
    _search(client, kb)
    assert _keys(away) == {f"Bearer {new}"}
    assert f"Bearer {old}" not in _keys(home)
    client.delete(f"{P}/knowledge_bases/{kb}")


def test_environment_key_stays_with_openai(
    client: httpx.Client, away: OpenAIStub, unique: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`OPENAI_API_KEY` goes to api.openai.com only: never to an embedder or reranker on another server."""
    env = _key(unique, "env")
    monkeypatch.setenv("OPENAI_API_KEY", env)
    kb = f"bind_env_{unique}"
    embed = {"provider": "openai", "model_name": f"env-{unique}", "base_url": away.base_url, "dimensions": 8}
    away.reset()
    _kb(client, kb, embed, {"provider": "openai", "model_name": "judge", "base_url": away.base_url})
    _search(client, kb)
    paths = {r.path.rsplit("/", 1)[-1] for r in away.requests}
    assert paths == {"embeddings", "completions"} and _keys(away) == {""}, _keys(away)
    client.delete(f"{P}/knowledge_bases/{kb}")


# --- agents -------------------------------------------------------------------------------------------


def _complete(client: httpx.Client, agent: str) -> None:
    r = client.post(
        f"{P}/agents/{agent}/completions", json={"messages": [{"question": "hi", "answer": None}]}
    )
    assert r.status_code == 200, r.text


def test_agent_model_and_params_moved_by_put_or_sql(
    client: httpx.Client, home: OpenAIStub, away: OpenAIStub, unique: str
) -> None:
    a1, a2 = f"bind_a1_{unique}", f"bind_a2_{unique}"
    k1, k2 = _key(unique, "a1-home"), _key(unique, "a2-home")
    model = _model(home, k1)
    assert client.post(f"{P}/agents", json={"agent": {"name": a1, "model": model}}).status_code == 201
    flat = {"openai_api_key": k2, "base_url": home.base_url}  # MindsDB's flat LLM params
    a2_body = {"name": a2, "model": {"provider": "openai", "model_name": "stub"}, "params": flat}
    assert client.post(f"{P}/agents", json={"agent": a2_body}).status_code == 201
    away.reset()

    _refused(
        client.put(
            f"{P}/agents/{a1}",
            json={"agent": {"model": {**model, "base_url": away.base_url, "api_key": MASK}}},
        ),
        "model.api_key",
    )
    _refused(
        client.put(
            f"{P}/agents/{a1}", json={"agent": {"model": {**model, "api_key": MASK, "base_url": None}}}
        ),
        "model.api_key",
    )
    moved = _obj({**model, "base_url": away.base_url, "api_key": MASK})
    _sql_refused(client, f"ALTER AGENT {a1} USING model = {moved}", "model.api_key")
    _refused(
        client.put(f"{P}/agents/{a2}", json={"agent": {"params": {"base_url": away.base_url}}}),
        "params.openai_api_key",
    )
    _sql_refused(client, f"UPDATE AGENT {a2} SET base_url = '{away.base_url}'", "params.openai_api_key")
    _sql_refused(
        client, f"ALTER AGENT {a2} USING openai_api_base = '{away.base_url}'", "params.openai_api_key"
    )
    assert client.get(f"{P}/agents/{a1}").json()["model"] == model
    home.reset()
    _complete(client, a1)
    _complete(client, a2)
    assert _keys(home) == {f"Bearer {k1}", f"Bearer {k2}"} and away.requests == []

    # no endpoint changed: `******` keeps the stored keys
    other = {**model, "model_name": "stub-2", "api_key": MASK, "temperature": 0.1}
    assert client.put(f"{P}/agents/{a1}", json={"agent": {"model": other}}).status_code == 200
    params = {"temperature": 0.2, "openai_api_key": MASK}
    assert client.put(f"{P}/agents/{a2}", json={"agent": {"params": params}}).status_code == 200
    home.reset()
    _complete(client, a1)
    _complete(client, a2)
    assert _keys(home) == {f"Bearer {k1}", f"Bearer {k2}"} and away.requests == []

    # sent again with the new server: the new keys go there
    n1, n2 = _key(unique, "a1-away"), _key(unique, "a2-away")
    put = client.put(
        f"{P}/agents/{a1}", json={"agent": {"model": {**model, "base_url": away.base_url, "api_key": n1}}}
    )
    assert put.status_code == 200, put.text
    ok = _sql(client, f"UPDATE AGENT {a2} SET base_url = '{away.base_url}', openai_api_key = '{n2}'")
    assert ok["type"] == "ok", ok
    home.reset()
    _complete(client, a1)
    _complete(client, a2)
    assert _keys(away) == {f"Bearer {n1}", f"Bearer {n2}"} and home.requests == []
    for agent in (a1, a2):
        client.delete(f"{P}/agents/{agent}")


def test_per_query_model_override_to_another_server(
    client: httpx.Client, home: OpenAIStub, away: OpenAIStub, unique: str
) -> None:
    agent, stored, given = f"bind_q_{unique}", _key(unique, "q-home"), _key(unique, "q-away")
    assert (
        client.post(f"{P}/agents", json={"agent": {"name": agent, "model": _model(home, stored)}}).status_code
        == 201
    )
    away.reset()
    ask = f"SELECT answer FROM {agent} WHERE question = 'hi' USING model = "
    _sql_refused(client, ask + _obj({"base_url": away.base_url}), "model.api_key")
    _sql_refused(client, ask + _obj({"base_url": away.base_url, "api_key": MASK}), "model.api_key")
    assert away.requests == []
    home.reset()
    same = _sql(client, ask + _obj({"model_name": "stub-2", "api_key": MASK}))
    assert same["type"] == "table" and _keys(home) == {f"Bearer {stored}"}, same
    moved = _sql(client, ask + _obj({"base_url": away.base_url, "api_key": given}))
    assert moved["type"] == "table" and _keys(away) == {f"Bearer {given}"}, moved
    client.delete(f"{P}/agents/{agent}")


# --- data sources -------------------------------------------------------------------------------------


def test_data_source_moved_to_another_host_or_database(
    client: httpx.Client, pg_source: dict[str, Any], pg_url: str, unique: str
) -> None:
    name, password = f"bind_ds_{unique}", f"Ds-Pw-{unique}"
    body = {
        "database": {"name": name, "engine": "postgres", "parameters": {**pg_source, "password": password}}
    }
    assert client.post("/api/databases", json=body).status_code == 201
    with externals.table("postgres", pg_source, f"bind_{unique}", "id int, body text", [(1, "first")]):
        before = client.get(f"/api/databases/{name}").json()
        for given in (
            {"host": "127.0.0.2"},
            {"host": "127.0.0.2", "password": MASK},
            {"port": 1},
            {"user": "intruder"},
        ):
            put = client.put(f"/api/databases/{name}", json={"database": {"parameters": given}})
            _refused(put, "parameters.password")
        assert client.get(f"/api/databases/{name}").json() == before  # nothing stored
        alter = _sql(client, f"ALTER DATABASE {name} host = '127.0.0.2'")
        assert alter["type"] == "error", alter
        query = f"SELECT body FROM {name}.bind_{unique}"
        assert _sql(client, query)["data"] == [["first"]]

        # no endpoint changed: `******` keeps the password
        kept = {"password": MASK, "schema": "public"}
        put = client.put(f"/api/databases/{name}", json={"database": {"parameters": kept}})
        assert put.status_code == 200, put.text
        with fresh_database(pg_url, f"bind_{unique}") as url:
            with psycopg.connect(libpq(url), autocommit=True) as conn:
                conn.execute(f"CREATE TABLE bind_{unique} (id int, body text)")
                conn.execute(f"INSERT INTO bind_{unique} VALUES (1, 'second')")
            moved = {"database": f"bind_{unique}"}
            _refused(
                client.put(f"/api/databases/{name}", json={"database": {"parameters": moved}}),
                "parameters.password",
            )
            again = {**moved, "password": f"{password}-2"}
            put = client.put(
                f"/api/databases/{name}", json={"database": {"parameters": again}, "check_connection": True}
            )
            assert put.status_code == 200, put.text
            assert _sql(client, query)["data"] == [["second"]]
            client.delete(f"/api/databases/{name}")


# --- imports ------------------------------------------------------------------------------------------


def _export(client: httpx.Client, kb: str) -> list[dict[str, Any]]:
    r = client.get(f"{P}/knowledge_bases/{kb}/export")
    assert r.status_code == 200, r.text
    return [orjson.loads(line) for line in gzip.decompress(r.content).splitlines()]


def _upload(client: httpx.Client, lines: list[dict[str, Any]], **fields: str) -> httpx.Response:
    data = gzip.compress(b"".join(orjson.dumps(r) + b"\n" for r in lines))
    files = {"file": ("kb.agentkb.jsonl.gz", data, "application/gzip")}
    return client.post(f"{P}/knowledge_bases/import", data=fields, files=files)


def _with_model(lines: list[dict[str, Any]], **model: Any) -> list[dict[str, Any]]:
    header = json.loads(json.dumps(lines[0]))
    header["knowledge_base"]["embedding_model"].update(model)
    return [header, *lines[1:]]


def test_import_shows_and_checks_its_endpoints(
    client: httpx.Client, home: OpenAIStub, away: OpenAIStub, pg_url: str, unique: str
) -> None:
    kb, stored, given = f"bind_ex_{unique}", _key(unique, "ex-home"), _key(unique, "ex-away")
    _kb(client, kb, _model(home, stored, dimensions=8))
    lines = _export(client, kb)
    assert lines[0]["secrets_omitted"] == ["embedding_model.api_key"]
    copy = f"bind_im_{unique}"
    away.reset()

    for url in (
        "http://169.254.169.254/latest/v1",
        "http://metadata.google.internal/v1",
        "file:///etc/passwd",
    ):
        refused = _upload(client, _with_model(lines, base_url=url), name=copy, embedding_api_key=given)
        assert assert_problem(refused, 400)["title"] == "Invalid endpoint", refused.text
    # a missing key: the answer says where the key would go
    missing = _upload(client, _with_model(lines, base_url=away.base_url), name=copy)
    detail = assert_problem(missing, 400)["detail"]
    assert "embedding_model.api_key" in detail and away.base_url in detail, detail
    # an encrypted value in the file (a stored key of this server) is never decrypted for the file's server
    with psycopg.connect(libpq(pg_url)) as conn:
        row = conn.execute(
            "SELECT embedding_model->>'api_key' FROM knowledge_bases WHERE name = %s", (kb,)
        ).fetchone()
    assert row is not None and str(row[0]).startswith("enc:v1:")
    sealed = _with_model(lines, base_url=away.base_url, api_key=row[0])
    sealed[0]["secrets_omitted"] = []
    assert_problem(_upload(client, sealed, name=copy), 400)
    assert_problem(
        _upload(client, _with_model(lines, base_url=away.base_url), name=copy, embedding_api_key=row[0]), 400
    )
    assert client.get(f"{P}/knowledge_bases/{copy}").status_code == 404
    assert away.requests == []

    imported = _upload(client, _with_model(lines, base_url=away.base_url), name=copy, embedding_api_key=given)
    assert imported.status_code == 201, imported.text
    assert imported.json()["endpoints"] == {"embedding_model": away.base_url}
    home.reset()
    _search(client, copy)
    assert _keys(away) == {f"Bearer {given}"} and home.requests == []
    for name in (kb, copy):
        client.delete(f"{P}/knowledge_bases/{name}")


def test_a_fresh_kb_of_another_server_gets_no_default_key(
    settings: Any, home: OpenAIStub, away: OpenAIStub
) -> None:
    """The server's default embedding model's key stays with the default's server."""
    from tests.conftest import ServedApp

    default_key = f"sk-default-{uuid.uuid4().hex[:8]}-0123456789"
    default = _model(home, default_key, dimensions=8)
    with (
        ServedApp(settings.model_copy(update={"default_embedding_model": default})) as app,
        httpx.Client(base_url=app.url, timeout=120) as c,
    ):
        u = uuid.uuid4().hex[:8]
        home.reset()
        away.reset()
        _kb(c, f"bind_def_{u}", {"model_name": "stub"})  # the default's server: its key
        _kb(c, f"bind_other_{u}", {"base_url": away.base_url})  # another server: no key of the default's
        _search(c, f"bind_other_{u}")
        assert _keys(home) == {f"Bearer {default_key}"}
        assert away.requests and _keys(away) == {""}
        for name in (f"bind_def_{u}", f"bind_other_{u}"):
            c.delete(f"{P}/knowledge_bases/{name}")


def test_evaluate_llm_gets_no_default_key_for_another_server() -> None:
    """`EVALUATE ... USING llm = {...}`: the default model's key goes only with the default's server."""
    from agentkb.service.retrieval.evaluate import EvaluateService

    default = {
        "provider": "openai",
        "model_name": "gpt-x",
        "api_key": "sk-default",
        "base_url": "http://home/v1",
    }
    service = EvaluateService(None, None, default, None, None)  # type: ignore[arg-type]
    kb: Any = None
    same = service.llm_for({"model_name": "gpt-y"}, kb)
    assert same == {**default, "model_name": "gpt-y"}
    moved = service.llm_for({"provider": "openai", "base_url": "http://away/v1"}, kb)
    assert "api_key" not in moved and moved["base_url"] == "http://away/v1"
    given = service.llm_for({"base_url": "http://away/v1", "api_key": "sk-mine"}, kb)
    assert given["api_key"] == "sk-mine"


def test_encrypted_values_are_never_taken_from_a_request(
    client: httpx.Client, home: OpenAIStub, away: OpenAIStub, pg_url: str, unique: str
) -> None:
    """A stored key's encrypted text (read from a backup, say) sent as a secret would be decrypted for the
    request's server: every create and update refuses it, and nothing reaches that server."""
    kb = f"bind_enc_{unique}"
    _kb(client, kb, _model(home, _key(unique, "enc"), dimensions=8))
    with psycopg.connect(libpq(pg_url)) as conn:
        row = conn.execute(
            "SELECT embedding_model->>'api_key' FROM knowledge_bases WHERE name = %s", (kb,)
        ).fetchone()
    assert row is not None and str(row[0]).startswith("enc:v1:")
    sealed = str(row[0])
    away.reset()
    agent = {"name": f"bind_enc_{unique}", "model": _model(away, sealed)}
    body = assert_problem(client.post(f"{P}/agents", json={"agent": agent}), 400)
    assert "'model.api_key' holds an encrypted value" in body["detail"], body
    theirs = {"name": f"bind_enc2_{unique}", "embedding_model": _model(away, sealed, dimensions=8)}
    assert_problem(client.post(f"{P}/knowledge_bases", json={"knowledge_base": theirs}), 400)
    moved = {"embedding_model": {"base_url": away.base_url, "api_key": sealed}}
    assert_problem(
        client.put(f"{P}/knowledge_bases/{f'bind_enc_{unique}'}", json={"knowledge_base": {"params": moved}}),
        400,
    )
    database = {
        "name": f"bind_enc_{unique}",
        "engine": "postgres",
        "parameters": {"host": "x", "password": sealed},
    }
    assert_problem(client.post("/api/databases", json={"database": database}), 400)
    assert client.get(f"{P}/agents/{agent['name']}").status_code == 404
    assert client.get(f"/api/databases/{database['name']}").status_code == 404
    assert client.get(f"{P}/knowledge_bases/{kb}").json()["embedding_model"]["base_url"] == home.base_url
    _search(client, kb)
    assert away.requests == []
    client.delete(f"{P}/knowledge_bases/{kb}")


def test_endpoint_fields_and_the_rule() -> None:
    from agentkb.errors import BadRequest
    from agentkb.secrecy import check_bound, is_endpoint_key

    for name in (
        "base_url",
        "openai_api_base",
        "anthropic_api_url",
        "ollama_base_url",
        "api_base",
        "endpoint",
        "azure_endpoint",
        "baseUrl",
        "host",
        "port",
        "user",
        "username",
        "database",
        "dbname",
        "url",
        "uri",
        "dsn",
        "account",
        "project",
        "region",
        "provider",
    ):
        assert is_endpoint_key(name), name
    for name in ("api_key", "model_name", "temperature", "max_tokens", "schema", "timeout", "password"):
        assert not is_endpoint_key(name), name
    stored = {"host": "db-a", "port": 5432, "password": "enc:v1:0000abcd:token", "schema": "s"}
    check_bound(stored, {**stored, "port": "5432", "schema": "t"}, {"port": "5432", "schema": "t"})
    check_bound(stored, {**stored, "host": "db-b", "password": "new"}, {"host": "db-b", "password": "new"})
    check_bound(stored, {"host": "db-b", "password": None}, {"host": "db-b", "password": None})  # dropped
    with pytest.raises(BadRequest, match="'p.host' changed: send 'p.password' again"):
        check_bound(stored, {**stored, "host": "db-b"}, {"host": "db-b", "password": MASK}, "p.")
