"""Where the server connects on a user's behalf (agentkb/destinations.py): link-local and cloud metadata
addresses never (model servers, data sources, the crawler), whether named literally or by a host name that
resolves there when the connection is made; data sources not on unix sockets, agentkb's own database or files
outside the data-source directory, unless the operator allows it.

Every hostile request goes over real HTTP to a served agentkb. No request leaves the machine: the refused
addresses are refused before any connection, and host names are answered by `destinations.use_resolver`
(no DNS query)."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkb import destinations
from agentkb.destinations import DataSourcePolicy, DestinationRefused
from tests.conftest import ServedApp
from tests.helpers import assert_problem
from tests.openai_stub import OpenAIStub

P = "/api/projects/mindsdb"
METADATA = "http://169.254.169.254/v1"
NEVER = "link-local / cloud metadata address: agentkb never connects there"


@pytest.fixture(scope="module")
def strict_dirs() -> Iterator[tuple[Path, Path]]:
    """(data directory, data-source file directory) of the strict server."""
    root = Path(tempfile.mkdtemp(prefix="agentkb-test-dest-"))
    root.chmod(0o755)
    (root / "databases").mkdir()
    yield root / "data", root / "databases"
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def strict(pg_url: str, strict_dirs: tuple[Path, Path]) -> Iterator[httpx.Client]:
    """A client of agentkb served with the default data-source policy (nothing local allowed)."""
    from agentkb.settings import Settings

    data_dir, file_dir = strict_dirs
    settings = Settings(
        database_url=pg_url,
        data_dir=data_dir,
        data_source_file_dir=file_dir,
        data_source_allow_local=False,
        worker_enabled=False,
    )
    with ServedApp(settings) as app, httpx.Client(base_url=app.url, timeout=60) as client:
        yield client


def refused(response: httpx.Response, *names: str) -> str:
    assert_problem(response, 400)
    detail = str(response.json()["detail"])
    assert all(name in detail for name in names), detail
    return detail


def kb_names(client: httpx.Client) -> set[str]:
    return {kb["name"] for kb in client.get(f"{P}/knowledge_bases").json()}


# --- model servers -----------------------------------------------------------------------------------------
def test_kb_with_a_metadata_embedding_server_is_refused(client: httpx.Client, unique: str) -> None:
    model = {"provider": "openai", "model_name": "m", "base_url": METADATA, "dimensions": 4}
    kb = f"meta_{unique}"
    r = client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb, "embedding_model": model}})
    refused(r, "169.254.169.254", NEVER)
    assert kb not in kb_names(client)  # nothing stored

    sql = f"CREATE KNOWLEDGE_BASE {kb} USING embedding_model = {{'provider': 'openai', 'model_name': 'm', "
    sql += "'base_url': 'http://[fe80::1]/v1', 'dimensions': 4}"
    answer = client.post("/api/sql/query", json={"query": sql}).json()
    assert answer["type"] == "error" and NEVER in answer["error_message"], answer
    assert kb not in kb_names(client)


def test_alter_and_put_to_a_metadata_server_are_refused(
    client: httpx.Client, stub: OpenAIStub, unique: str
) -> None:
    kb = f"alter_{unique}"
    created = client.post(
        f"{P}/knowledge_bases",
        json={"knowledge_base": {"name": kb, "embedding_model": stub.embedding_model()}},
    )
    assert created.status_code == 201, created.text
    # the key is sent again with each new endpoint (a stored one is bound to its server: test_secret_binding)
    alter = f"ALTER KNOWLEDGE_BASE {kb} USING embedding_model = {{'base_url': '{METADATA}', 'api_key': 'sk-new-0123'}}"
    answer = client.post("/api/sql/query", json={"query": alter}).json()
    assert answer["type"] == "error" and "169.254.169.254" in answer["error_message"], answer
    put = {"knowledge_base": {"params": {"reranking_model": {"model_name": "r", "base_url": METADATA}}}}
    refused(client.put(f"{P}/knowledge_bases/{kb}", json=put), "reranking_model.base_url", NEVER)
    put = {
        "knowledge_base": {
            "params": {
                "embedding_model": {"base_url": "http://metadata.google.internal/", "api_key": "sk-new-0123"}
            }
        }
    }
    refused(client.put(f"{P}/knowledge_bases/{kb}", json=put), "metadata.google.internal", NEVER)
    record = client.get(f"{P}/knowledge_bases/{kb}").json()
    assert record["embedding_model"]["base_url"] == stub.url and record["reranking_model"] is None


def test_agent_with_a_metadata_llm_is_refused(client: httpx.Client, unique: str) -> None:
    name = f"meta_agent_{unique}"
    model = {"provider": "openai", "model_name": "m", "base_url": METADATA}
    refused(
        client.post(f"{P}/agents", json={"agent": {"name": name, "model": model}}), "model.base_url", NEVER
    )
    assert client.get(f"{P}/agents/{name}").status_code == 404

    assert client.post(f"{P}/agents", json={"agent": {"name": name}}).status_code == 201
    flat = {"agent": {"params": {"openai_api_base": "http://100.100.100.200/v1"}}}
    refused(client.put(f"{P}/agents/{name}", json=flat), "params.openai_api_base", NEVER)
    assert "openai_api_base" not in client.get(f"{P}/agents/{name}").json().get("params", {})


def test_names_resolving_to_link_local_are_refused_when_connecting(
    client: httpx.Client, stub: OpenAIStub, unique: str
) -> None:
    port = stub.url.split(":")[2].split("/")[0]
    answers = {"models.test": ["127.0.0.1"], "imds.test": ["169.254.169.254"], "ll6.test": ["fe80::1"]}
    with destinations.use_resolver(answers):
        # the same stub by a name: resolved when connecting, allowed (a loopback model server)
        kb = f"byname_{unique}"
        model = {**stub.embedding_model(), "base_url": f"http://models.test:{port}/v1"}
        body = {"name": kb, "embedding_model": model}
        assert client.post(f"{P}/knowledge_bases", json={"knowledge_base": body}).status_code == 201
        rows = {"knowledge_base": {"rows": [{"id": 1, "content": "a cat"}]}}
        assert client.put(f"{P}/knowledge_bases/{kb}", json=rows).status_code == 200

        # a stored model whose name now resolves to a metadata address: refused at connect time
        kb = f"imds_{unique}"
        model = {**stub.embedding_model(), "base_url": f"http://imds.test:{port}/v1"}
        created = client.post(
            f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb, "embedding_model": model}}
        )
        assert created.status_code == 201, created.text  # a name is judged by its answers when connecting
        stub.reset()
        refused(
            client.put(f"{P}/knowledge_bases/{kb}", json=rows), "imds.test resolves to 169.254.169.254", NEVER
        )
        assert stub.requests == []
        assert client.post("/api/sql/query", json={"query": f"SELECT * FROM {kb}"}).json()["data"] == []

        # the reranker and an agent's LLM, by a name resolving to a link-local IPv6 address
        kb = f"rerank_{unique}"
        reranker = {"provider": "openai", "model_name": "r", "base_url": f"http://ll6.test:{port}/v1"}
        body = {"name": kb, "embedding_model": stub.embedding_model(), "reranking_model": reranker}
        assert client.post(f"{P}/knowledge_bases", json={"knowledge_base": body}).status_code == 201
        assert client.put(f"{P}/knowledge_bases/{kb}", json=rows).status_code == 200
        search = client.post(f"{P}/knowledge_bases/{kb}/search", json={"query": "cat"})
        refused(search, "ll6.test resolves to fe80::1", NEVER)

        agent = f"llm_{unique}"
        model = {**stub.chat_model(), "base_url": f"http://ll6.test:{port}/v1"}
        assert client.post(f"{P}/agents", json={"agent": {"name": agent, "model": model}}).status_code == 201
        run = client.post(
            f"{P}/agents/{agent}/completions", json={"messages": [{"question": "hi", "answer": None}]}
        )
        assert run.status_code >= 400 and "fe80::1" in run.text and NEVER in run.text, run.text
    assert not any(r.path.endswith("/chat/completions") for r in stub.requests)  # nothing reached the stub


# --- data sources ------------------------------------------------------------------------------------------
def create_source(client: httpx.Client, name: str, engine: str, params: dict[str, Any]) -> httpx.Response:
    body = {"database": {"name": name, "engine": engine, "parameters": params}, "check_connection": True}
    return client.post("/api/databases", json=body)


def source_names(client: httpx.Client) -> set[str]:
    return {d["name"] for d in client.get("/api/databases").json()}


def test_data_sources_on_sockets_or_metadata_are_refused(
    strict: httpx.Client, pg_source: dict[str, Any], unique: str
) -> None:
    own = {**pg_source}  # the suite's own PostgreSQL, over its unix socket: superuser without a password
    refused(create_source(strict, f"own_{unique}", "postgres", own), f"host {own['host']} is a unix socket")
    abstract = {**own, "host": "@agentkb"}
    refused(create_source(strict, f"abs_{unique}", "postgres", abstract), "unix socket")
    body = {"database": {"name": f"unchecked_{unique}", "engine": "postgres", "parameters": own}}
    refused(strict.post("/api/databases", json=body), "unix socket")  # stored unchecked: refused all the same
    imds = {"host": "169.254.169.254", "port": 80, "user": "u", "database": "d"}
    refused(create_source(strict, f"imds_{unique}", "mysql", imds), "169.254.169.254", NEVER)
    sql = (
        f"CREATE DATABASE sql_{unique} WITH ENGINE = 'postgres', "
        f"PARAMETERS = {{'host': '{own['host']}', 'port': {own['port']}, 'user': 'postgres', 'database': 'x'}}"
    )
    answer = strict.post("/api/sql/query", json={"query": sql}).json()
    assert answer["type"] == "error" and "unix socket" in answer["error_message"], answer
    assert not {f"own_{unique}", f"abs_{unique}", f"unchecked_{unique}", f"sql_{unique}"} & source_names(
        strict
    )


def test_data_source_resolving_to_link_local_is_refused(strict: httpx.Client, unique: str) -> None:
    with destinations.use_resolver({"db.test": ["169.254.10.20"]}):
        params = {"host": "db.test", "port": 5432, "user": "u", "database": "d"}
        refused(
            create_source(strict, f"ll_{unique}", "postgres", params), "db.test resolves to 169.254.10.20"
        )
    assert f"ll_{unique}" not in source_names(strict)


def test_sqlite_files_outside_the_directory_are_refused(
    strict: httpx.Client, strict_dirs: tuple[Path, Path], unique: str
) -> None:
    data_dir, file_dir = strict_dirs
    outside = file_dir.parent / f"outside_{unique}.db"
    outside.write_bytes(b"")
    link = file_dir / f"link_{unique}.db"
    link.symlink_to(outside)
    data_dir.mkdir(exist_ok=True)
    (data_dir / "secret.db").write_bytes(b"")
    for i, path in enumerate(
        (
            "/etc/passwd",
            str(outside),
            f"../outside_{unique}.db",
            link.name,
            str(link),
            str(data_dir / "secret.db"),
        )
    ):
        refused(create_source(strict, f"lite{i}_{unique}", "sqlite", {"db_file": path}), path)
    assert not any(n.startswith("lite") and n.endswith(unique) for n in source_names(strict))

    inside = file_dir / f"shop_{unique}.db"
    with sqlite3.connect(inside) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
    assert create_source(strict, f"shop_{unique}", "sqlite", {"db_file": inside.name}).status_code == 201


def test_the_operator_may_allow_local_sources(
    client: httpx.Client, pg_source: dict[str, Any], tmp_path: Path, unique: str
) -> None:
    """The suite's own settings allow local sources (AGENTKB_DATA_SOURCE_ALLOW_LOCAL, a file directory over
    the temporary directory); metadata addresses stay refused."""
    assert create_source(client, f"ownok_{unique}", "postgres", pg_source).status_code == 201
    imds = {"host": "fd00:ec2::254", "port": 5432, "user": "u", "database": "d"}
    refused(create_source(client, f"imdsok_{unique}", "postgres", imds), "fd00:ec2::254", NEVER)


def test_own_database_server_over_tcp() -> None:
    own = destinations.own_servers("postgresql://agentkb@localhost:6543/agentkb")
    policy = DataSourcePolicy(file_dir=Path("/nonexistent"), own_servers=own)
    with pytest.raises(DestinationRefused, match="agentkb's own database server"):
        policy.server_addresses("127.0.0.1", 6543)
    assert policy.server_addresses("127.0.0.1", 3306)  # another loopback server (a local MariaDB)
    allowed = DataSourcePolicy(file_dir=Path("/nonexistent"), own_servers=own, allow_local=True)
    assert allowed.server_addresses("127.0.0.1", 6543)
    assert destinations.own_servers("postgresql://u@/db?host=/tmp/sock") == ()


# --- the crawler and URL uploads ---------------------------------------------------------------------------
def test_crawler_refuses_link_local_even_when_private_is_allowed(client: httpx.Client, unique: str) -> None:
    kb = f"crawl_{unique}"
    assert client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb}}).status_code == 201
    with destinations.use_resolver({"imds.test": ["169.254.169.254"]}):
        for url in ("http://169.254.169.254/latest/meta-data/", "http://169.254.1.1/", "http://imds.test/"):
            r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"urls": [url]}})
            refused(r, "link-local / cloud metadata address")
    r = client.put("/api/files/imds", json={"source_type": "url", "source": "http://169.254.169.254/"})
    refused(r, "URL file upload is disabled")
