"""`agentkb serve` as a real process on the embedded PostgreSQL: data survives restarts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil

from tests.conftest import free_port
from tests.helpers import wait_serving


@contextmanager
def serve(data_dir: Path, port: int, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    if env is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKB_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentkb", "serve", "--data-dir", str(data_dir), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_serving(
            proc,
            f"http://127.0.0.1:{port}/api/status",
            60,
            lambda: proc.stderr.read().decode() if proc.stderr else "",
        )
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


def _postgres_running(pg_dir: Path) -> bool:
    for proc in psutil.process_iter(attrs=("name", "cmdline")):
        if proc.info["name"] == "postgres" and str(pg_dir) in " ".join(proc.info["cmdline"] or []):
            return True
    return False


def test_data_survives_restart_and_postgres_stops_cleanly(data_dir: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    agent = {"agent": {"name": "keeper", "prompt_template": "remember me", "data": {"tables": ["db.t"]}}}
    with serve(data_dir, port):
        created = httpx.post(f"{url}/api/projects/mindsdb/agents", json=agent).json()
        kb = httpx.post(
            f"{url}/api/projects/mindsdb/knowledge_bases", json={"knowledge_base": {"name": "kept"}}
        )
        assert kb.status_code == 201
        assert httpx.post(f"{url}/api/projects", json={"name": "second"}).status_code == 201
    assert not _postgres_running(data_dir / "pg"), "embedded PostgreSQL left running after SIGTERM"

    with serve(data_dir, port):
        assert httpx.get(f"{url}/api/projects/mindsdb/agents/keeper").json() == created
        assert httpx.get(f"{url}/api/projects/mindsdb/knowledge_bases/kept").json() == {
            **kb.json(),
            "document_count": 0,
            "chunk_count": 0,
        }
        assert {"name": "second"} in httpx.get(f"{url}/api/projects").json()


def test_restart_after_kill(data_dir: Path) -> None:
    """A SIGKILLed server leaves PostgreSQL running; the next start attaches to it and loses nothing."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serve(data_dir, port) as proc:
        assert (
            httpx.post(f"{url}/api/projects/mindsdb/agents", json={"agent": {"name": "survivor"}}).status_code
            == 201
        )
        proc.kill()
        proc.wait(timeout=30)
    with serve(data_dir, port):
        assert httpx.get(f"{url}/api/projects/mindsdb/agents/survivor").status_code == 200
    assert not _postgres_running(data_dir / "pg")


PLUGIN = """
import os


class Plugin:
    def new_schema_validator(self, *args, **kwargs):
        return None, None, None


open(os.environ["PLUGIN_MARK"], "a").close()
plugin = Plugin()
"""


def test_serve_loads_no_pydantic_plugin_unless_asked(data_dir: Path, tmp_path: Path) -> None:
    """pydantic scans every installed package's entry points for plugins as the first model is built; `agentkb
    serve` sets PYDANTIC_DISABLE_PLUGINS unless the operator did, so a start skips that scan. An installed
    plugin (a distribution on PYTHONPATH declaring one) loads only when the operator asks for plugins."""
    site = tmp_path / "site"
    (site / "agentkb_test_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "agentkb_test_plugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: agentkb-test-plugin\nVersion: 1.0\n"
    )
    (site / "agentkb_test_plugin-1.0.dist-info" / "entry_points.txt").write_text(
        "[pydantic]\nagentkb_test_plugin = agentkb_test_plugin:plugin\n"
    )
    (site / "agentkb_test_plugin.py").write_text(PLUGIN)
    mark = tmp_path / "loaded"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTKB_", "PYDANTIC_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(site), env.get("PYTHONPATH", "")]), PLUGIN_MARK=str(mark))
    port = free_port()
    with serve(data_dir, port, env):
        assert httpx.get(f"http://127.0.0.1:{port}/api/projects").status_code == 200
    assert not mark.exists()

    with serve(data_dir, port, {**env, "PYDANTIC_DISABLE_PLUGINS": ""}):  # the operator's choice: all plugins
        assert httpx.get(f"http://127.0.0.1:{port}/api/projects").status_code == 200
    assert mark.exists()
