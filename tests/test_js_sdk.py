"""MindsDB's JavaScript SDK (mindsdb-js-sdk, installed with npm) against agentkb, unchanged: the walk-through
of MindsDB's JavaScript docs — databases, projects, and knowledge bases and agents through `SQL.runQuery`
(tests/js/walkthrough.mjs). Needs Node.js and npm; skipped, with the reason, where they are absent."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

JS_DIR = Path(__file__).parent / "js"


@pytest.fixture(scope="module")
def js_sdk() -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js and npm are not installed: the MindsDB JavaScript SDK test needs them")
    if not (JS_DIR / "node_modules" / "mindsdb-js-sdk").is_dir():
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--no-package-lock", "--loglevel=error"],
            cwd=JS_DIR,
            check=True,
            timeout=300,
        )
    return JS_DIR


def _walkthrough(js_dir: Path, base_url: str, sqlite_file: Path) -> dict[str, Any]:
    done = subprocess.run(
        ["node", str(js_dir / "walkthrough.mjs"), base_url, str(sqlite_file)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_js_sdk_walkthrough(js_sdk: Path, base_url: str, tmp_path: Path) -> None:
    shop = tmp_path / "shop.db"
    with sqlite3.connect(shop) as conn:
        conn.execute("CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT)")
        conn.executemany("INSERT INTO products VALUES (?, ?)", [(1, "router"), (2, "modem")])
    out = _walkthrough(js_sdk, base_url, shop)

    assert "mindsdb" in out["projects"]
    assert out["created_database"] == {"name": "js_shop", "type": "data", "engine": "sqlite"}
    assert {"name": "js_shop", "type": "data", "engine": "sqlite"} in out["databases"]
    assert {"name": "mindsdb", "type": "project", "engine": None} in out["databases"]
    assert out["got_database"] == {"name": "js_shop", "type": "data", "engine": "sqlite"}
    data_names = [row["database"] for row in out["data_databases"]["rows"]]
    assert out["data_databases"]["error"] is None and "js_shop" in data_names and "mindsdb" not in data_names
    assert out["select_source"]["rows"] == [{"id": 1, "name": "router"}, {"id": 2, "name": "modem"}]

    for step in ("create_kb", "insert_kb", "create_agent", "drop_agent", "drop_kb"):
        assert out[step]["type"] == "ok", (step, out[step])
    search = out["search_kb"]
    assert search["columns"] == ["id", "chunk_content", "category", "relevance"], search
    assert search["rows"][0]["id"] == 1 and search["rows"][0]["category"] == "network"
    assert "router" in search["rows"][0]["chunk_content"]
    assert [row["id"] for row in out["filter_kb"]["rows"]] == [2]  # ids keep their type, as in MindsDB
    assert "js_kb" in [row["name"] for row in out["show_kbs"]["rows"]]

    answer = out["ask_agent"]
    assert answer["columns"] == ["answer"], answer
    assert "ten seconds" in answer["rows"][0]["answer"]
    assert "js_agent" in [row["name"] for row in out["show_agents"]["rows"]]
    assert "js_shop" not in out["databases_after"]
