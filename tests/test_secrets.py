"""Secrets given through the API never come back, except the agent record's `model.api_key` (spec 2.1):
not in records, SHOW / information_schema answers, traces, error messages or log lines; they are stored
encrypted (a `pg_dump` holds none of them), providers still get the real keys, and a masked value sent
back on update keeps the stored secret."""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet

from agentkb import logs, secrecy
from tests import externals
from tests.openai_stub import OpenAIStub, Scripted, error, text
from tests.secret_helpers import maria_login, pg_dump, stored_json

MASK = "******"
ROWS = [
    {"id": 1, "content": "Lighthouses guide ships along rocky coasts at night."},
    {"id": 2, "content": "Bees communicate the direction of flowers by dancing."},
    {"id": 3, "content": "Glaciers carve valleys over thousands of years."},
]


# --- the leaf module ------------------------------------------------------------------------------------


def test_secret_field_names() -> None:
    secret = [
        "api_key",
        "openai_api_key",
        "apiKey",
        "X-Api-Key",
        "password",
        "db_password",
        "passwd",
        "secret",
        "client_secret",
        "aws_secret_access_key",
        "private_key",
        "token",
        "access_token",
        "api_token",
        "credentials",
        "authorization",
        "PASSWORD",
        "connection_string",
    ]
    shown = [
        "max_tokens",
        "ssl_key",
        "key",
        "token_limit",
        "primary_key",
        "model_name",
        "base_url",
        "CONNECTION_DATA",
        "embedding_model",
        "passage",
        "tokenizer",
    ]
    assert [k for k in secret if not secrecy.is_secret_key(k)] == []
    assert [k for k in shown if secrecy.is_secret_key(k)] == []


def test_mask_secrets_at_any_depth() -> None:
    given = {
        "api_key": "k1",
        "max_tokens": 5,
        "none": {"password": None},
        "nested": [{"token": {"a": 1}}, {"dsn_note": "postgresql://app:pw-in-url@db/x"}],
    }
    assert secrecy.mask_secrets(given) == {
        "api_key": MASK,
        "max_tokens": 5,
        "none": {"password": None},
        "nested": [{"token": MASK}, {"dsn_note": f"postgresql://app:{MASK}@db/x"}],
    }


def test_mask_text() -> None:
    secrecy.remember("remembered-secret-1")
    masked = secrecy.mask_text(
        "remembered-secret-1 at postgresql://u:hunter22@h/db; password=abc1, {'api_key': 'zz9'} "
        "Bearer abcdefgh12 sk-1234567890ab max_tokens: 5 pwd: short",
        extra=["short"],
    )
    for leaked in (
        "remembered-secret-1",
        "hunter22",
        "abc1",
        "zz9",
        "abcdefgh12",
        "sk-1234567890ab",
        "short",
    ):
        assert leaked not in masked, masked
    assert "max_tokens: 5" in masked and "postgresql://u:******@h/db" in masked


def _mask_every_pattern(text: str) -> str:
    """`mask_text`'s patterns, each run over the whole text (no known values): what its shortcuts must equal."""
    from agentkb.secrecy import masking

    text = masking._URL_PASSWORD.sub(rf"\1:{MASK}@", text)
    text = masking._KEY_VALUE.sub(rf"\1\2\3{MASK}", text)
    text = masking._BEARER.sub(rf"\1 {MASK}", text)
    return masking._PROVIDER_KEY.sub(MASK, text)


def test_mask_text_shortcuts_change_nothing() -> None:
    """`mask_text` runs a pattern only where the words it needs appear (ASCII text); over texts built
    from the patterns' own pieces, in any case, it masks exactly as running every pattern does."""
    import random

    pieces = [
        "PassWord",
        "passwd",
        "PWD",
        "Secret",
        "api_key",
        "APIKEY",
        "Token",
        "private_KEY",
        "Credentials",
        "=",
        ": ",
        '"',
        "'",
        " ",
        "x9",
        "abcdef123",
        "Bearer ",
        "BASIC ",
        "sk-",
        "rk-",
        "SK-",
        "0123456789ab",
        "postgresql://",
        "user",
        ":",
        "@",
        "host/db",
        "GET /api/x 200 1.0ms",
        ",",
        "}",
        "\u017f",
        "\u212a",
        "\u0131",  # long s, Kelvin sign, dotless i: case-insensitive matches beyond ASCII
    ]
    rng = random.Random(7)
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 14))) for _ in range(20_000)]
    texts += ["pa\u017f\u017fword=abc", "api_\u212aey: zz9", "Bearer abcdefgh12", "x sk-1234567890ab y"]
    differ = [t for t in texts if secrecy.mask_text(t) != _mask_every_pattern(t)]
    assert not differ, differ[:5]
    # the regex's own case-insensitive matching, beyond ASCII
    assert secrecy.mask_text("pa\u017f\u017fword=abc") == f"pa\u017f\u017fword={MASK}"


def test_seal_reveal_and_a_foreign_key() -> None:
    box = secrecy.SecretBox([secrecy.generate_key()], "test")
    value = {"model": {"api_key": "sk-seal-me-123", "n": 1}, "creds": [{"password": 1234}], "url": "http://x"}
    sealed = box.seal(value)
    assert "sk-seal-me-123" not in json.dumps(sealed) and "1234" not in json.dumps(sealed["creds"])
    assert sealed["model"]["api_key"].startswith(f"enc:v1:{box.primary}:") and sealed["url"] == "http://x"
    assert box.seal(sealed) == sealed  # idempotent: sealed values are never sealed twice
    assert box.reveal(sealed) == value
    other = secrecy.SecretBox([secrecy.generate_key()], "AGENTKB_SECRET_KEY")
    with pytest.raises(secrecy.SecretUnavailable) as refused:
        other.reveal(sealed, "agent a model")
    assert refused.value.status == 500 and box.primary in refused.value.detail  # names the missing key id
    assert "sk-seal-me-123" not in refused.value.detail and "AGENTKB_SECRET_KEY" in refused.value.detail
    assert other.reveal(sealed, strict=False)["model"]["api_key"] == MASK
    tampered = sealed["model"]["api_key"][:-6] + "AAAAAA"
    with pytest.raises(secrecy.SecretUnavailable, match="altered"):
        box.reveal_value(tampered)
    both = secrecy.SecretBox([*other.keys, *box.keys], "both")
    rotated = both.reseal(sealed)
    assert set(secrecy.sealed_key_ids(rotated)) == {other.primary} and both.reveal(rotated) == value


def test_key_file_is_created_once_private(tmp_path: Path) -> None:
    from agentkb.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", secret_key=None)
    first = secrecy.load_keys(settings)
    assert first.created and first.path == tmp_path / "data" / "secret.key"
    assert first.path.stat().st_mode & 0o777 == 0o600
    again = secrecy.load_keys(settings)
    assert not again.created and again.keys == first.keys and not again.warnings
    first.path.chmod(0o644)
    assert "chmod 600" in secrecy.load_keys(settings).warnings[0]
    bad = Fernet.generate_key().decode()[:-4] + "!!!!"
    with pytest.raises(secrecy.SecretKeyError) as refused:
        secrecy.load_keys(Settings(data_dir=tmp_path, secret_key=bad))
    assert bad not in str(refused.value) and "AGENTKB_SECRET_KEY" in str(refused.value)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_log_lines_are_masked(fmt: str) -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    factory = logging.getLogRecordFactory()
    stream = io.StringIO()
    try:
        logs.configure("INFO", fmt)
        root.handlers[0].setStream(stream)  # type: ignore[attr-defined]
        secrecy.remember("logged-secret-value-9")
        try:
            raise RuntimeError("cannot reach postgresql://app:pw-in-trace@db/x with logged-secret-value-9")
        except RuntimeError:
            logging.getLogger("agentkb.test").exception("failed with password=%s", "pw-in-args")
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
        logging.setLogRecordFactory(factory)
    out = stream.getvalue()
    assert "RuntimeError" in out and "failed with password=" in out
    for leaked in ("logged-secret-value-9", "pw-in-trace", "pw-in-args"):
        assert leaked not in out, out


# --- over HTTP ------------------------------------------------------------------------------------------


@dataclass
class World:
    u: str
    project: str
    kb: str
    agent: str
    ds: str
    secrets: dict[str, str]
    llm: OpenAIStub  # chat: the agent and the reranker
    embed: OpenAIStub  # embeddings
    shown: list[tuple[str, str]] = field(default_factory=list)  # (what, response text) to check

    @property
    def p(self) -> str:
        return f"/api/projects/{self.project}"

    def model(self, key: str) -> dict[str, Any]:
        return {"provider": "openai", "model_name": "gpt-stub", "api_key": key, "base_url": self.llm.base_url}

    def keep(self, what: str, response: httpx.Response) -> httpx.Response:
        self.shown.append((what, response.text))
        return response


def _leaks(world: World, text: str) -> list[str]:
    return [name for name, value in world.secrets.items() if value in text]


@pytest.fixture(scope="module")
def world(base_url: str, pg_source: dict[str, Any]) -> Iterator[World]:
    u = uuid.uuid4().hex[:8]
    secrets = {
        "agent api_key": f"sk-agent-{u}-0001",
        "agent params token": f"agent-param-token-{u}",
        "kb api_key": f"kb-embed-key-{u}",
        "kb params access_token": f"kb-param-token-{u}",
        "kb params url password": f"url-pw-{u}",
        "reranker api_key": f"rerank-key-{u}",
        "data source password": f"Ds-Pw-{u}",
    }
    table = (f"sec_{u}", "id int, body text", [(1, "reachable")])
    with (
        OpenAIStub() as llm,
        OpenAIStub() as embed,
        externals.table("postgres", pg_source, *table),
        httpx.Client(base_url=base_url, timeout=120) as c,
    ):
        world = World(u, f"sec_{u}", "kb", "agent", f"pg_sec_{u}", secrets, llm, embed)
        assert c.post("/api/projects", json={"name": world.project}).status_code == 201
        ds = {**pg_source, "password": secrets["data source password"]}
        body = {"database": {"name": world.ds, "engine": "postgres", "parameters": ds}}
        assert world.keep("POST database", c.post("/api/databases", json=body)).status_code == 201
        kb = {
            "name": world.kb,
            "embedding_model": {
                "provider": "openai",
                "model_name": "stub",
                "base_url": embed.url,
                "dimensions": 8,
                "api_key": secrets["kb api_key"],
            },
            "reranking_model": {
                "provider": "openai",
                "model_name": "judge",
                "base_url": llm.base_url,
                "api_key": secrets["reranker api_key"],
            },
            # secrets in params: a contextual LLM's key, and a URL with a password in its prompt's template
            "preprocessing": {
                "type": "contextual",
                "contextual_config": {
                    "llm_config": {**world.model(secrets["kb params access_token"])},
                    "context_template": "Origin postgresql://app:"
                    f"{secrets['kb params url password']}@db/x. {{CHUNK_CONTENT}}",
                },
            },
        }
        created = world.keep("POST kb", c.post(f"{world.p}/knowledge_bases", json={"knowledge_base": kb}))
        assert created.status_code == 201, created.text
        inserted = c.put(f"{world.p}/knowledge_bases/{world.kb}", json={"knowledge_base": {"rows": ROWS}})
        assert inserted.status_code == 200, inserted.text
        llm.reset()  # the contexts the insert asked for
        agent = {
            "name": world.agent,
            "model": world.model(secrets["agent api_key"]),
            "params": {"anthropic_api_key": secrets["agent params token"]},
        }
        made = world.keep("POST agent", c.post(f"{world.p}/agents", json={"agent": agent}))
        assert made.status_code == 201, made.text
        yield world
        c.delete(f"{world.p}/agents/{world.agent}")
        c.delete(f"{world.p}/knowledge_bases/{world.kb}")
        c.delete(f"/api/projects/{world.project}")
        c.delete(f"/api/databases/{world.ds}")


def _sql(client: httpx.Client, world: World, query: str) -> dict[str, Any]:
    r = world.keep(
        query, client.post("/api/sql/query", json={"query": query, "context": {"db": world.project}})
    )
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_records_and_catalog_answers_show_no_secret(client: httpx.Client, world: World) -> None:
    p = world.p
    kb = world.keep("GET kb", client.get(f"{p}/knowledge_bases/{world.kb}")).json()
    assert kb["embedding_model"]["api_key"] == MASK and kb["reranking_model"]["api_key"] == MASK
    contextual = kb["params"]["preprocessing"]["contextual_config"]
    assert contextual["llm_config"]["api_key"] == MASK
    assert contextual["context_template"] == MASK  # a URL with a password is a secret wherever it is
    assert kb["embedding_model"]["base_url"] == world.embed.url and kb["document_count"] == 3
    world.keep("GET kbs", client.get(f"{p}/knowledge_bases"))
    ds = world.keep("GET database", client.get(f"/api/databases/{world.ds}")).json()
    assert ds["connection_data"]["password"] == MASK and ds["connection_data"]["database"] == "sources"
    world.keep("GET databases", client.get("/api/databases/"))
    for query in (
        "SHOW KNOWLEDGE_BASES",
        "SHOW DATABASES",
        "SHOW AGENTS",
        "SELECT * FROM information_schema.knowledge_bases",
        "SELECT * FROM information_schema.databases",
        "SELECT * FROM information_schema.agents",
    ):
        answer = _sql(client, world, query)
        assert answer["type"] == "table" and answer["data"], answer
    kbs = _sql(client, world, f"SELECT * FROM information_schema.knowledge_bases WHERE name = '{world.kb}'")
    row = dict(zip(kbs["column_names"], kbs["data"][0], strict=True))
    assert row["EMBEDDING_MODEL"]["api_key"] == MASK
    assert row["PARAMS"]["preprocessing"]["contextual_config"]["llm_config"]["api_key"] == MASK
    dbs = _sql(client, world, f"SELECT * FROM information_schema.databases WHERE name = '{world.ds}'")
    connection_data = dict(zip(dbs["column_names"], dbs["data"][0], strict=True))["CONNECTION_DATA"]
    assert json.loads(connection_data)["password"] == MASK  # JSON text, as MindsDB

    # The agent record is the one exception: it echoes model.api_key (spec 2.1), and nothing else.
    for what, response in (
        ("GET agent", client.get(f"{p}/agents/{world.agent}")),
        ("GET agents", client.get(f"{p}/agents")),
    ):
        body = response.json()
        records = body if isinstance(body, list) else [body]
        for record in records:
            if record["name"] == world.agent:
                assert record["model"]["api_key"] == world.secrets["agent api_key"]
                assert record["params"]["anthropic_api_key"] == MASK
            record["model"].pop("api_key", None)
        world.shown.append((what, json.dumps(body)))

    leaks = [(what, _leaks(world, text)) for what, text in world.shown if _leaks(world, text)]
    agent_echo = [w for w, names in leaks if w == "POST agent" and names == ["agent api_key"]]
    assert [w for w, _ in leaks] == agent_echo, leaks  # only the creation's echo of the agent's key


def test_errors_traces_and_sql_errors_show_no_secret(
    client: httpx.Client, world: World, caplog: pytest.LogCaptureFixture
) -> None:
    key = world.secrets["agent api_key"]
    p = f"{world.p}/agents/{world.agent}"
    world.llm.script(error(401, f"Incorrect API key provided: {key}"))
    failed = world.keep(
        "completion error",
        client.post(f"{p}/completions", json={"messages": [{"question": "hi", "answer": None}]}),
    )
    assert failed.status_code == 502 and "401" in failed.json()["detail"], failed.text
    assert world.llm.requests[0].headers["authorization"] == f"Bearer {key}"  # the provider got the real key

    world.llm.script(error(401, f"Incorrect API key provided: {key}"))
    streamed = world.keep(
        "stream error",
        client.post(f"{p}/completions/stream", json={"messages": [{"question": "hi", "answer": None}]}),
    )
    chunks = [json.loads(line[6:]) for line in streamed.text.split("\n\n") if line.startswith("data: ")]
    trace_id = next(c["trace_id"] for c in chunks if c.get("trace_id"))
    assert any(c.get("type") == "error" or "error" in c for c in chunks), chunks
    trace = world.keep("trace", client.get(f"{p}/traces/{trace_id}"))
    assert trace.status_code == 200 and trace.json()["status"] == "error", trace.text
    assert trace.json()["error"] and MASK in trace.json()["error"]

    # An embedder failing at a URL with a password, whose reply echoes the key it was given.
    url_pw, embed_key = f"embed-url-pw-{world.u}", f"embed-key-{world.u}-b"
    world.secrets.update({"embedding url password": url_pw, "second embedding key": embed_key})
    base = world.embed.url.replace("http://", f"http://app:{url_pw}@")
    model = {
        "provider": "openai",
        "model_name": "stub",
        "base_url": base,
        "dimensions": 8,
        "api_key": embed_key,
    }
    made = world.keep(
        "POST kb 2",
        client.post(
            f"{world.p}/knowledge_bases", json={"knowledge_base": {"name": "kb2", "embedding_model": model}}
        ),
    )
    assert made.status_code == 201, made.text
    world.embed.script_embeddings(
        Scripted(401, {"error": {"message": f"Incorrect API key provided: {embed_key}"}})
    )
    refused = world.keep(
        "embedding error",
        client.put(f"{world.p}/knowledge_bases/kb2", json={"knowledge_base": {"rows": ROWS}}),
    )
    assert refused.status_code == 502 and "HTTP 401" in refused.json()["detail"], refused.text
    assert MASK in refused.json()["detail"]
    jobs = world.keep("jobs", client.get(f"{world.p}/knowledge_bases/kb2/jobs"))
    assert jobs.status_code == 200 and "HTTP 401" in jobs.text
    client.delete(f"{world.p}/knowledge_bases/kb2")

    # The SQL parser quotes the statement in its error: the password inside must not come back.
    sql_pw = f"Sql-Pw-{world.u}"
    world.secrets["password in bad SQL"] = sql_pw
    broken = f"CREATE DATABASE x WITH ENGINE='postgres', PARAMETERS={{'host': 'h', 'password': '{sql_pw}' 'user': 'u'}}"
    answer = _sql(client, world, broken)
    assert answer["type"] == "error" and "Syntax error" in answer["error_message"], answer

    leaks = [(what, _leaks(world, text)) for what, text in world.shown if _leaks(world, text)]
    assert [w for w, _ in leaks] in ([], ["POST agent"]), leaks
    # The served app logged these failures (with the default handlers, not `agentkb serve`'s): masked too.
    assert "Incorrect API key provided" in caplog.text and "HTTP 401" in caplog.text
    assert _leaks(world, caplog.text) == []


def test_providers_get_real_keys_and_masked_round_trips_keep_them(client: httpx.Client, world: World) -> None:
    p, s = world.p, world.secrets
    # Knowledge base: send the masked record's models back with an insert; the stored keys stay.
    record = client.get(f"{p}/knowledge_bases/{world.kb}").json()
    params = {"embedding_model": record["embedding_model"], "reranking_model": record["reranking_model"]}
    world.embed.reset()
    more = [{"id": 4, "content": "Owls hunt silently thanks to soft feathers."}]
    r = client.put(
        f"{p}/knowledge_bases/{world.kb}", json={"knowledge_base": {"rows": more, "params": params}}
    )
    assert r.status_code == 200, r.text
    assert {q.headers["authorization"] for q in world.embed.requests} == {f"Bearer {s['kb api_key']}"}
    assert (
        client.get(f"{p}/knowledge_bases/{world.kb}").json()["embedding_model"] == record["embedding_model"]
    )
    world.embed.reset()
    world.llm.script(text(json.dumps({"scores": [0.9, 0.8, 0.7, 0.6]})))
    hits = client.post(f"{p}/knowledge_bases/{world.kb}/search", json={"query": "how do bees talk"})
    assert hits.status_code == 200 and len(hits.json()) == 4, hits.text
    assert world.embed.requests[0].headers["authorization"] == f"Bearer {s['kb api_key']}"
    assert world.llm.requests[0].headers["authorization"] == f"Bearer {s['reranker api_key']}"

    # Agent: `******` keeps the stored key; a new key replaces it.
    masked = client.put(f"{p}/agents/{world.agent}", json={"agent": {"model": world.model(MASK)}})
    assert masked.status_code == 200 and masked.json()["model"]["api_key"] == s["agent api_key"], masked.text
    world.llm.script(text("Bees dance."))
    answer = client.post(
        f"{p}/agents/{world.agent}/completions", json={"messages": [{"question": "bees?", "answer": None}]}
    )
    assert answer.status_code == 200 and answer.json()["message"]["content"] == "Bees dance.", answer.text
    assert world.llm.requests[0].headers["authorization"] == f"Bearer {s['agent api_key']}"
    params_back = client.put(
        f"{p}/agents/{world.agent}", json={"agent": {"params": {"anthropic_api_key": MASK}}}
    )
    assert (
        params_back.json()["params"]["anthropic_api_key"] == MASK
        and s["agent params token"] not in params_back.text
    )

    # Data source: PUT the masked parameters back; the stored password stays.
    ds = client.get(f"/api/databases/{world.ds}").json()
    put = client.put(
        f"/api/databases/{world.ds}",
        json={"database": {"parameters": ds["connection_data"]}, "check_connection": True},
    )
    assert put.status_code == 200 and _unstamped(put.json()) == _unstamped(ds), put.text
    assert _sql(client, world, f"SELECT body FROM {world.ds}.sec_{world.u}")["data"] == [["reachable"]]


def _unstamped(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "date_last_update"}


def test_data_source_password_reaches_mariadb_after_a_masked_round_trip(
    client: httpx.Client, mariadb: dict[str, Any]
) -> None:
    """MariaDB checks passwords: a query that works proves the real one was sent."""
    u = uuid.uuid4().hex[:8]
    password, name = f"Maria-Pw-{u}", f"maria_sec_{u}"
    with maria_login(mariadb, f"sec_{u}", password):
        params = {**mariadb, "user": f"sec_{u}", "password": password}
        created = client.put(
            f"/api/databases/{name}", json={"database": {"engine": "mariadb", "parameters": params}}
        )
        assert created.status_code == 201 and password not in created.text, created.text
        try:
            query = {"query": f"SELECT body FROM {name}.sec_{u}", "context": {"db": "mindsdb"}}
            expected = [["reachable with the real password"]]
            assert client.post("/api/sql/query", json=query).json()["data"] == expected
            record = client.get(f"/api/databases/{name}").json()
            assert record["connection_data"]["password"] == MASK
            put = client.put(
                f"/api/databases/{name}",
                json={"database": {"parameters": record["connection_data"]}, "check_connection": True},
            )
            assert put.status_code == 200 and password not in put.text, put.text
            assert _unstamped(put.json()) == _unstamped(record)
            assert client.post("/api/sql/query", json=query).json()["data"] == expected
            wrong = client.put(
                f"/api/databases/{name}",
                json={"database": {"parameters": {"password": "nope-nope"}}, "check_connection": True},
            )
            assert wrong.status_code == 400 and wrong.json()["title"] == "Connection error", wrong.text
            assert "Access denied" in wrong.json()["detail"] and "nope-nope" not in wrong.text
            assert client.post("/api/sql/query", json=query).json()["data"] == expected  # nothing stored
            other = client.put(f"/api/databases/{name}", json={"database": {"engine": "postgres"}})
            assert other.status_code == 400 and other.json()["title"] == "Invalid engine", other.text
        finally:
            client.delete(f"/api/databases/{name}")


def test_pg_dump_holds_no_secret_in_clear(world: World, pg_url: str) -> None:
    dump = pg_dump(pg_url)
    assert dump.count("enc:v1:") >= len(world.secrets) - 2  # the sealed values are there...
    assert _leaks(world, dump) == []  # ...and none of the plain ones
    assert _leaks(world, stored_json(pg_url)) == []
