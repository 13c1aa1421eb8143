"""A `clickhouse` data source against a real ClickHouse server: MindsDB's parameters, pushed-down SELECTs
rendered for ClickHouse, and every query under `readonly = 2` (no write, no way to turn it off).

Needs `clickhouse-server` on PATH (Debian's package) and `clickhouse-sqlalchemy` (`agentkb[clickhouse]`);
skipped, with the reason, without them. The server runs on loopback ports of its own, in a temporary
directory, for this module only."""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy

from agentkb.destinations import DataSourcePolicy
from agentkb.errors import BadRequest
from agentkb.sql import datasources, pushdown

SERVER = shutil.which("clickhouse-server")
pytestmark = [
    pytest.mark.skipif(
        SERVER is None, reason="clickhouse-server is not installed (apt-get install clickhouse-server)"
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("clickhouse_sqlalchemy") is None,
        reason="clickhouse-sqlalchemy is not installed (pip install 'agentkb[clickhouse]')",
    ),
]

CONFIG = """<yandex>
  <logger><level>warning</level><console>1</console></logger>
  <tcp_port>{tcp}</tcp_port><http_port>{http}</http_port><listen_host>127.0.0.1</listen_host>
  <path>{root}/data/</path><tmp_path>{root}/tmp/</tmp_path><user_files_path>{root}/files/</user_files_path>
  <mark_cache_size>5368709</mark_cache_size><users_config>users.xml</users_config>
  <default_profile>default</default_profile><default_database>default</default_database>
</yandex>"""
USERS = """<yandex>
  <profiles><default></default></profiles><quotas><default></default></quotas>
  <users><reader><password>ch-s3cret</password><networks><ip>127.0.0.1</ip></networks>
  <profile>default</profile><quota>default</quota></reader></users>
</yandex>"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_query(port: int, sql: str) -> str:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/?user=reader&password=ch-s3cret", data=sql.encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return str(answer.read().decode())


@pytest.fixture(scope="module")
def clickhouse() -> Iterator[dict[str, Any]]:
    assert SERVER is not None
    root = Path(tempfile.mkdtemp(prefix="agentkb-clickhouse-"))
    tcp, http = free_port(), free_port()
    (root / "config.xml").write_text(CONFIG.format(tcp=tcp, http=http, root=root))
    (root / "users.xml").write_text(USERS)
    proc = subprocess.Popen(
        [SERVER, f"--config-file={root / 'config.xml'}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=root,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                http_query(http, "SELECT 1")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("clickhouse-server did not start")
                time.sleep(0.1)
        http_query(
            http,
            "CREATE TABLE default.items (id UInt32, name String, stock Nullable(UInt32)) ENGINE = Memory",
        )
        http_query(
            http,
            "INSERT INTO default.items VALUES (1, 'apple', 10), (2, 'it''s \\\\ odd', NULL), (3, 'cherry', 0)",
        )
        yield {
            "protocol": "native",
            "host": "127.0.0.1",
            "port": tcp,
            "user": "reader",
            "password": "ch-s3cret",
            "database": "default",
            "http": http,
        }
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


def test_pushed_down_selects_read_clickhouse(clickhouse: dict[str, Any]) -> None:
    params = {k: v for k, v in clickhouse.items() if k != "http"}
    policy = DataSourcePolicy(file_dir=Path(tempfile.gettempdir()))
    datasources.test_connection("clickhouse", params, policy)
    engine = datasources.create("clickhouse", params, policy)
    try:
        assert sqlalchemy.inspect(engine).get_table_names() == ["items"]

        def run(sql: str) -> list[dict[str, Any]]:
            rendered = pushdown.parse_select(sql).render("clickhouse")
            return [row for _, batch in pushdown.stream_rows(engine, rendered) for row in batch]

        assert run(
            "SELECT id, name FROM ch.items WHERE stock > 0 OR stock IS NULL ORDER BY id DESC LIMIT 2"
        ) == [
            {"id": 2, "name": "it's \\ odd"},
            {"id": 1, "name": "apple"},
        ]
        assert run("SELECT id FROM ch.items WHERE name = 'it''s \\\\ odd'") == [{"id": 2}]
        with pytest.raises(BadRequest, match=r"Unknown identifier: nope\.$"):  # a 400, the trace left out
            run("SELECT nope FROM ch.items")
        assert run("SELECT `name` AS `the name` FROM ch.`items` ORDER BY id LIMIT 1 OFFSET 2") == [
            {"the name": "cherry"}
        ]
        with engine.connect() as conn:
            for write in (
                "INSERT INTO items VALUES (9, 'x', 1)",
                "CREATE TABLE more (a UInt8) ENGINE = Memory",
                "SET readonly = 0",
            ):
                with pytest.raises(Exception, match="readonly mode"):  # noqa: PT011 - the driver's own class
                    conn.exec_driver_sql(write)
    finally:
        engine.dispose()
    assert http_query(clickhouse["http"], "SELECT count() FROM default.items").strip() == "3"
