"""Fixtures for the ported MindsDB tests.

MindsDB's HTTP tests get a fresh app per module (`tests/unit/api/http/conftest.py`: a module-scoped app on a
new sqlite store) and its executor tests a fresh store per test. Here every test module gets its own agentkb,
served over real HTTP on its own PostgreSQL database (in the suite's embedded server) and data directory;
the executor-test modules also call `MindsDB.reset()` before each test. The postgres data sources the tests
register are scratch databases in that same embedded server (`mdb.SCRATCH`), dropped at the end.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.compat.mdb import SCRATCH, MindsDB, MindsDBEmbeddings, MindsDBLLM
from tests.conftest import ServedApp


@pytest.fixture(scope="session", autouse=True)
def _scratch_databases(pg_url: str, pg_source: dict[str, Any]) -> Iterator[None]:
    """`postgres_tables` makes its source databases in the embedded PostgreSQL; dropped at the end."""
    SCRATCH.open(pg_url, pg_source)
    yield
    SCRATCH.close()


@pytest.fixture(scope="session")
def mdb_embeddings() -> Iterator[MindsDBEmbeddings]:
    with MindsDBEmbeddings() as server:
        yield server


@pytest.fixture(scope="session")
def llm() -> Iterator[MindsDBLLM]:
    with MindsDBLLM() as server:
        yield server


@pytest.fixture(scope="session")
def fresh_app(pg_url: str) -> Any:
    """`with fresh_app(**settings) as app:` an agentkb of its own (own database, own data directory)."""

    @contextlib.contextmanager
    def start(**overrides: Any) -> Iterator[ServedApp]:
        from agentkb.settings import Settings

        name = f"compat_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        url = make_url(pg_url).set(database=name).render_as_string(hide_password=False)
        data_dir = Path(tempfile.mkdtemp(prefix="agentkb-compat-"))
        settings = Settings(
            database_url=url,
            data_dir=data_dir,
            job_heartbeat_s=0.5,
            job_stale_after_s=5,
            crawl_allow_private=True,
            # MindsDB's tests swap the mocked embedding function mid-test (`set_embedding(base=20)`); a
            # real model is deterministic, so the server's query-vector cache is off for this harness only
            query_embedding_cache_size=0,
            **overrides,
        )
        try:
            with ServedApp(settings) as app:
                yield app
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)
            with contextlib.suppress(psycopg.Error), psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    return start


@pytest.fixture(scope="module")
def compat_app(fresh_app: Any) -> Iterator[ServedApp]:
    with fresh_app() as app:
        yield app


@pytest.fixture(scope="module")
def base_url(compat_app: ServedApp) -> str:
    return compat_app.url


@pytest.fixture()
def client(base_url: str) -> Iterator[httpx.Client]:
    # MindsDB's tests pass follow_redirects=True on every call
    with httpx.Client(base_url=base_url, timeout=120, follow_redirects=True) as c:
        yield c


@pytest.fixture()
def mdb(client: httpx.Client, mdb_embeddings: MindsDBEmbeddings) -> MindsDB:
    return MindsDB(client, mdb_embeddings)
