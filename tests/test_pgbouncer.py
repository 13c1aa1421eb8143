"""agentkb behind PgBouncer in transaction mode (tests/pgbouncer.py, Debian's package; PgBouncer < 1.21 carries
no prepared statement): with `AGENTKB_DATABASE_TRANSACTION_POOLED` psycopg prepares nothing (without it two
clients of one server connection clash on a prepared statement's name), and the work that holds a session —
job leases, the merge lock — goes to `AGENTKB_DATABASE_DIRECT_URL`, without which start-up is refused.

The core API modules also run whole through PgBouncer: `AGENTKB_TEST_DATABASE=pgbouncer python -m pytest
tests/test_projects_kbs_api.py tests/test_agents_api.py tests/test_sql_api.py` (tests/conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from pydantic import ValidationError
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from agentkb.settings import Settings
from agentkb.storage.db import Database
from tests import pgbouncer
from tests.conftest import ServedApp
from tests.openai_stub import OpenAIStub

pytestmark = pytest.mark.skipif(
    pgbouncer.binary() is None, reason="pgbouncer is not installed (apt-get install pgbouncer)"
)

P = "/api/projects/mindsdb"
DIRECT = "agentkb-direct"  # the application_name of the direct URL's sessions
WAIT_S = 120.0


@pytest.fixture(scope="module")
def bouncer(pg_url: str, base_url: str) -> Iterator[str]:
    """PgBouncer in front of the session's database (migrated by the session's server)."""
    with pgbouncer.pgbouncer(pg_url) as url:
        yield url


async def test_prepared_statements_clash_through_pgbouncer_unless_transaction_pooled(bouncer: str) -> None:
    tiny = bouncer.rsplit("/", 1)[0] + "/tiny"  # one server connection for every client

    async def twice_five_times(db: Database) -> None:
        async with db.read() as a, db.read() as b:  # two client connections, autocommit
            for _ in range(6):  # psycopg prepares a statement at its 5th run (prepare_threshold)
                for conn in (a, b):
                    assert await conn.scalar(text("SELECT CAST(:x AS int) + 1"), {"x": 1}) == 2

    plain = Database(tiny, pool_size=2)
    try:
        with pytest.raises(DBAPIError) as clash:
            await twice_five_times(plain)
        assert isinstance(clash.value.orig, psycopg.errors.DuplicatePreparedStatement), clash.value
    finally:
        await plain.close()
    pooled = Database(tiny, pool_size=2, transaction_pooled=True)
    try:
        await twice_five_times(pooled)
    finally:
        await pooled.close()


def test_transaction_pooling_needs_a_direct_url(bouncer: str) -> None:
    with pytest.raises(ValidationError, match="AGENTKB_DATABASE_DIRECT_URL"):
        Settings(database_url=bouncer, database_transaction_pooled=True)


def _lease_holders(pg_url: str, job_id: str) -> list[str]:
    """The application_name of each session holding the job's lease (`storage.jobs`)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
            "AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended('job:' || %s, 0)",
            (job_id,),
        ).fetchall()
    return [str(name) for (name,) in rows]


def _job(client: httpx.Client, kb: str, job_id: str, states: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        job: dict[str, Any] = client.get(f"{P}/knowledge_bases/{kb}/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.05)


def _sql(client: httpx.Client, query: str) -> dict[str, Any]:
    answer: dict[str, Any] = client.post("/api/sql/query", json={"query": query}).json()
    assert answer["type"] != "error", answer
    return answer


def test_the_api_through_pgbouncer(
    bouncer: str, pg_url: str, settings: Any, tmp_path: Path, unique: str
) -> None:
    direct = f"{pg_url}&application_name={DIRECT}" if "?" in pg_url else f"{pg_url}?application_name={DIRECT}"
    config = settings.model_copy(
        update={
            "database_url": bouncer,
            "database_direct_url": direct,
            "database_transaction_pooled": True,
            "data_dir": tmp_path,
        }
    )
    kb, slow = f"pgb_{unique}", f"pgb_held_{unique}"
    with (
        OpenAIStub() as stub,
        OpenAIStub() as held,
        ServedApp(config) as app,
        httpx.Client(base_url=app.url, timeout=60) as client,
    ):
        for name, source in ((kb, stub), (slow, held)):
            body = {"knowledge_base": {"name": name, "embedding_model": source.embedding_model()}}
            assert client.post(f"{P}/knowledge_bases", json=body).status_code == 201
        rows = [{"id": i, "content": f"Fact {i}: otters hold hands while they sleep."} for i in range(30)]
        r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows}})
        assert r.status_code == 200, r.text

        def search(i: int) -> int:
            body = {"query": f"otters {i}", "limit": 5, "hybrid_search": i % 2 == 0}
            with httpx.Client(base_url=app.url, timeout=60) as c:
                r = c.post(f"{P}/knowledge_bases/{kb}/search", json=body)
            assert r.status_code == 200, r.text
            return len(r.json())

        with ThreadPoolExecutor(6) as pool:  # many runs of each statement, from several connections
            assert set(pool.map(search, range(36))) == {5}

        # the merge lock (session-level) is taken on the direct URL; the search sets its HNSW breadth
        # in its own transaction
        _sql(client, f"CREATE INDEX ON KNOWLEDGE_BASE {kb} WITH (m = 8, ef_construction = 40)")
        _sql(client, f"ALTER KNOWLEDGE_BASE {kb} USING ef_search = 20")
        found = _sql(client, f"SELECT id FROM {kb} WHERE content = 'otters sleep' LIMIT 3")
        assert len(found["data"]) == 3, found

        # an async insert's lease: held on the direct URL's session while the job runs
        held.hold()
        try:
            r = client.put(
                f"{P}/knowledge_bases/{slow}?async=true",
                json={"knowledge_base": {"rows": [{"id": 1, "content": "held"}]}},
            )
            assert r.status_code == 202, r.text
            job_id = r.json()["job_id"]
            _job(client, slow, job_id, {"running"})
            assert _lease_holders(pg_url, job_id) == [DIRECT]
        finally:
            held.release()
        assert _job(client, slow, job_id, {"succeeded", "failed"})["state"] == "succeeded"

        # agents and the SQL endpoint
        agent = {"agent": {"name": f"pgb_agent_{unique}", "data": {"knowledge_bases": [kb]}}}
        assert client.post(f"{P}/agents", json=agent).status_code == 201
        answer = client.post(
            f"{P}/agents/pgb_agent_{unique}/completions",
            json={"messages": [{"question": "What do otters hold?", "answer": None}]},
        )
        assert answer.status_code == 200, answer.text
        listed = _sql(client, f"SELECT name FROM information_schema.knowledge_bases WHERE name = '{kb}'")
        assert listed["data"] == [[kb]], listed
        assert client.delete(f"{P}/knowledge_bases/{kb}").status_code == 204
