"""Assertions and set-up shared by the API tests."""

from __future__ import annotations

import re
import subprocess
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from sqlalchemy import text

from agentkb.cli.server import GracefulServer
from agentkb.storage import chunks, vector_index
from agentkb.storage.db import Database
from tests.conftest import ServedApp
from tests.secret_helpers import fresh_database

if TYPE_CHECKING:
    from tests.openai_stub import OpenAIStub

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6}$")
RECORD_KEYS = {"id", "name", "project_id", "created_at", "updated_at", "data", "model", "prompt_template"}
# the columns a knowledge base's `SELECT *` answers first, in MindsDB's order (then metadata columns, `metadata`)
KB_SELECT_COLUMNS = ["id", "chunk_id", "chunk_content", "distance", "relevance"]
ANIMAL_ROWS = [
    {"id": 1, "content": "The cheetah is the fastest land animal, reaching 110 km/h in short bursts."},
    {"id": 2, "content": "Emperor penguins huddle together to survive the Antarctic winter."},
    {"id": 3, "content": "Octopuses have three hearts and blue blood."},
]


def assert_problem(response: httpx.Response, status: int) -> dict[str, str]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    return body  # type: ignore[no-any-return]


class Graceful(ServedApp):
    """agentkb in a thread, stopped by the server's own shutdown path (`should_exit`, as a signal sets it)."""

    def __init__(self, settings: Any) -> None:
        super().__init__(settings)
        config = self.uvicorn.server.config
        self.uvicorn.server = GracefulServer(config, config.app.state.shutdown, grace_s=10)
        self.uvicorn.thread = threading.Thread(target=self.uvicorn.server.run, daemon=True)


def wait_serving(proc: subprocess.Popen[bytes], url: str, timeout: float, exited: Callable[[], str]) -> None:
    """Waits until GET `url` answers 200; fails with `exited()` if `proc` ends first, or after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, exited()
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.1)


def sql(client: httpx.Client, query: str, db: str = "mindsdb") -> dict[str, Any]:
    """The answer of `POST /api/sql/query` to `query`, run in the database `db`."""
    r = client.post("/api/sql/query", json={"query": query, "context": {"db": db}})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def sql_rows(client: httpx.Client, query: str, db: str = "mindsdb") -> list[dict[str, Any]]:
    """The rows of the table `query` answers, each as a dict of column name to value."""
    answer = sql(client, query, db)
    assert answer["type"] == "table", answer
    return [dict(zip(answer["column_names"], row, strict=True)) for row in answer["data"]]


def sql_ok(client: httpx.Client, query: str, db: str = "mindsdb") -> dict[str, Any]:
    """The answer to `query`, which must be `ok`."""
    answer = sql(client, query, db)
    assert answer["type"] == "ok", answer
    return answer


def sql_error(client: httpx.Client, query: str, db: str = "mindsdb") -> str:
    """The error message of the answer to `query`, which must be an error."""
    answer = sql(client, query, db)
    assert answer["type"] == "error", answer
    return str(answer["error_message"])


def export_header(name: str, embedding_model: dict[str, Any]) -> dict[str, Any]:
    """The header record of a knowledge-base export file for the KB `name` (3-dimensional vectors)."""
    return {
        "type": "header",
        "format": "agentkb-kb-export",
        "version": 1,
        "knowledge_base": {
            "name": name,
            "embedding_model": embedding_model,
            "params": {},
            "vector_dim": 3,
        },
        "secrets_omitted": [],
    }


def stub_kb(client: httpx.Client, name: str, stub: OpenAIStub, project: str = "mindsdb") -> None:
    """Create the knowledge base `name`, embedding with the OpenAI stub `stub`."""
    model = stub.embedding_model()
    r = client.post(
        f"/api/projects/{project}/knowledge_bases",
        json={"knowledge_base": {"name": name, "embedding_model": model}},
    )
    assert r.status_code == 201, r.text


def kb_with_rows(base_url: str, prefix: str, rows: list[dict[str, Any]]) -> str:
    """A new knowledge base in `mindsdb` (the default embedder) holding `rows`; its name."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=base_url, timeout=120) as c:
        created = c.post("/api/projects/mindsdb/knowledge_bases", json={"knowledge_base": {"name": name}})
        assert created.status_code == 201, created.text
        inserted = c.put(
            f"/api/projects/mindsdb/knowledge_bases/{name}", json={"knowledge_base": {"rows": rows}}
        )
        assert inserted.status_code == 200, inserted.text
    return name


def create_agent(client: httpx.Client, name: str, project: str = "mindsdb", **fields: Any) -> dict[str, Any]:
    """Create the agent `name` (its record's `fields`); the record."""
    r = client.post(f"/api/projects/{project}/agents", json={"agent": {"name": name, **fields}})
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def stub_llm(stub: OpenAIStub, key: str = "sk-test-key") -> dict[str, Any]:
    """An agent's `model` that chats with the OpenAI stub `stub` (as `gpt-stub`, with the API key `key`)."""
    return {"provider": "openai", "model_name": "gpt-stub", "api_key": key, "base_url": stub.base_url}


@contextmanager
def served_with_login(
    pg_url: str, data_dir: Path, prefix: str, username: str, password: str
) -> Iterator[ServedApp]:
    """agentkb served with authentication on (`username`, `password`) and no ingestion worker, on a new,
    empty database of the session's PostgreSQL (named `prefix_<random>`, dropped afterwards)."""
    from agentkb.settings import Settings

    with fresh_database(pg_url, f"{prefix}_{uuid.uuid4().hex[:8]}") as url:
        settings = Settings(
            database_url=url, data_dir=data_dir, username=username, password=password, worker_enabled=False
        )
        with ServedApp(settings) as app:
            yield app


@asynccontextmanager
async def chunk_table(pg_url: str, table: str, dim: int, *, pool_size: int = 2) -> AsyncIterator[Database]:
    """A chunk table `table` of `dim` dimensions made for one test, on a `Database` of its own; afterwards the
    table (and its watermark) is dropped and the `Database` closed, however the test ended. The database must
    be migrated (the `served` fixture)."""
    db = Database(pg_url, pool_size=pool_size)
    try:
        async with db.transaction() as conn:
            await chunks.create_chunk_table(conn, table, dim)
        yield db
    finally:
        async with db.transaction() as conn:
            await conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
            await vector_index.forget_table(conn, table)
        vector_index.forget(table)
        await db.close()
