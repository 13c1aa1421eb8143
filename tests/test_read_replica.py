"""`AGENTKB_DATABASE_READ_URL`: searches and knowledge-base listings read from the replica, writes go to
the primary. The "replica" is a role of the test PostgreSQL that can only read (SELECT grants,
`default_transaction_read_only = on`): a write sent to it would fail."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest

from tests.conftest import ServedApp
from tests.openai_stub import OpenAIStub

P = "/api/projects/mindsdb"


def _statuses_on_one_connection(base_url: str, path: str, body: bytes, times: int) -> list[int]:
    """POST `body` to `path` `times` times over one keep-alive connection; the status of each answer
    (the list stops short when the server closed the connection instead of answering)."""
    url = urlsplit(base_url)
    statuses: list[int] = []
    with socket.create_connection((url.hostname, url.port), timeout=60) as sock:
        stream = sock.makefile("rb")
        for _ in range(times):
            head = (
                f"POST {path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            try:
                sock.sendall(head.encode() + body)
                status_line = stream.readline()
            except ConnectionError:
                break
            if not status_line:
                break
            length = 0
            while (line := stream.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            stream.read(length)
            statuses.append(int(status_line.split()[1]))
    return statuses


def _sql(url: str, *statements: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows: list[tuple[object, ...]] = []
        for statement in statements:
            cur = conn.execute(statement)
            if cur.description is not None:
                rows = cur.fetchall()
        return rows


@pytest.fixture()
def reader_url(pg_url: str, unique: str) -> Iterator[str]:
    role = f"agentkb_reader_{unique}"
    _sql(
        pg_url,
        f"CREATE ROLE {role} LOGIN",
        f"ALTER ROLE {role} SET default_transaction_read_only = on",
        f"GRANT USAGE ON SCHEMA public TO {role}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {role}",  # new chunk tables
    )
    yield pg_url.replace("://postgres:@", f"://{role}:@", 1)
    _sql(
        pg_url,
        f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'",
        f"DROP OWNED BY {role}",
        f"DROP ROLE {role}",
    )


def test_searches_read_from_the_replica(pg_url: str, reader_url: str, tmp_path: Path, unique: str) -> None:
    from agentkb.settings import Settings

    role = reader_url.split("://", 1)[1].split(":", 1)[0]
    assert _sql(pg_url, f"SELECT count(*) FROM pg_stat_activity WHERE usename = '{role}'") == [(0,)]
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):  # the replica cannot take a write
        _sql(reader_url, "CREATE TABLE replica_write_probe (x int)")

    kb = f"replica_{unique}"
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    settings = Settings(database_url=pg_url, database_read_url=reader_url, data_dir=data_dir)
    with (
        OpenAIStub() as stub,
        ServedApp(settings) as app,
        httpx.Client(base_url=app.url, timeout=120) as client,
    ):
        r = client.post(
            f"{P}/knowledge_bases",
            json={"knowledge_base": {"name": kb, "embedding_model": stub.embedding_model()}},
        )
        assert r.status_code == 201, r.text  # a write: on the primary
        rows = [{"id": i, "content": f"Replica fact {i}: otters float on their backs."} for i in range(4)]
        r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows}})
        assert r.status_code == 200, r.text
        table = client.get(f"{P}/knowledge_bases/{kb}").json()["vector_database_table"]

        hits = client.post(f"{P}/knowledge_bases/{kb}/search", json={"query": "otters", "limit": 3})
        assert hits.status_code == 200, hits.text
        assert len(hits.json()) == 3
        # the search opened connections as the read-only role (and below: it needs that role's SELECT)
        sessions = _sql(pg_url, f"SELECT count(*) FROM pg_stat_activity WHERE usename = '{role}'")
        assert sessions[0][0] >= 1

        hybrid = client.post(
            f"{P}/knowledge_bases/{kb}/search",
            json={"query": "otters", "hybrid_search": True, "hybrid_search_alpha": 0.5},
        )
        assert hybrid.status_code == 200, hybrid.text
        listed = client.get(f"{P}/knowledge_bases")
        assert listed.status_code == 200 and kb in [k["name"] for k in listed.json()]

        # without SELECT on the chunk table the replica refuses: the search really reads there
        _sql(pg_url, f"REVOKE SELECT ON {table} FROM {role}")
        refused = client.post(f"{P}/knowledge_bases/{kb}/search", json={"query": "otters"})
        assert refused.status_code == 500
        # an unexpected error is answered without closing the client's connection: its next request on
        # that connection is answered too (the server used to close it, resetting a request sent meanwhile)
        body = b'{"query": "otters"}'
        assert _statuses_on_one_connection(app.url, f"{P}/knowledge_bases/{kb}/search", body, 2) == [500, 500]
        _sql(pg_url, f"GRANT SELECT ON {table} TO {role}")
        assert client.post(f"{P}/knowledge_bases/{kb}/search", json={"query": "otters"}).status_code == 200

        # writes keep going to the primary
        r = client.delete(f"{P}/knowledge_bases/{kb}")
        assert r.status_code == 204, r.text
