"""Start-up stays light, checked by which modules load (no timings): `import agentkb.app` imports none of the
large libraries that only some requests need (they are imported on first use), and the `agentkb` command's
help and `keys list` import no part of the HTTP server."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.secret_helpers import fresh_database

# imported on first use: the MCP SDK, pydantic-ai and each provider's SDK, DuckDB, the file parsers and the
# crawler's extractor and its httpx, the local embedders' engines, the API embedders' aiohttp, Alembic
# (migrations due), the web console's pages and their templates' Jinja2, NumPy (vectors are made on first use),
# sqlglot (agents' and pushed-down SQL), the text splitter (documents chunked), psutil (the embedded PostgreSQL's
# start, in its own thread), cryptography's key serialization (Snowflake key pairs)
HEAVY = (
    "mcp",
    "mcp_types",
    "pydantic_ai",
    "pydantic_graph",
    "openai",
    "anthropic",
    "google.genai",
    "botocore",
    "a2a",
    "duckdb",
    "duckdb_engine",
    "pypdf",
    "docx",
    "pptx",
    "openpyxl",
    "trafilatura",
    "lxml",
    "torch",
    "sentence_transformers",
    "transformers",
    "onnxruntime",
    "bm25s",
    "tiktoken",
    "aiohttp",
    "httpx",
    "httpcore",
    "httpx2",
    "httpcore2",
    "limits",
    "alembic",
    "agentkb.console.pages",
    "jinja2",
    "numpy",
    "threadpoolctl",
    "sqlglot",
    "semantic_text_splitter",
    "psutil",
    "cryptography.hazmat.primitives.serialization",
)
SERVER = ("agentkb.app", "agentkb.api", "agentkb.console", "fastapi", "starlette", "uvicorn")


def imported(args: list[str], env: dict[str, str] | None = None) -> set[str]:
    """The modules `python -X importtime <args>` imports (read from its import-time report)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=True,
    )
    return {
        line.rpartition("|")[2].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def among(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The `packages` (or their submodules) among `modules`."""
    return sorted(p for p in packages if any(m == p or m.startswith(p + ".") for m in modules))


def test_the_app_imports_no_heavy_library() -> None:
    modules = imported(["-c", "import agentkb.app"])
    assert "agentkb.app" in modules and "fastapi" in modules  # the report was read
    assert among(modules, HEAVY) == []


def test_help_imports_no_server() -> None:
    modules = imported(["-m", "agentkb", "--help"])
    assert "agentkb.cli.main" in modules and "typer" in modules
    assert among(modules, (*SERVER, "agentkb.service", "agentkb.runtime", "sqlalchemy", *HEAVY)) == []


@pytest.fixture()
def database(pg_url: str) -> Iterator[str]:
    with fresh_database(pg_url, f"keys_{uuid.uuid4().hex[:8]}") as url:
        yield url


def test_keys_list_imports_no_server(database: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKB_")}
    env.update(AGENTKB_DATABASE_URL=database, AGENTKB_DATA_DIR=str(tmp_path))
    modules = imported(["-m", "agentkb", "keys", "list"], env)
    assert "agentkb.runtime" in modules  # it opened the services
    assert among(modules, SERVER) == []
