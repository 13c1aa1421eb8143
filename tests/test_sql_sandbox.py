"""The SQL sandbox (`sql/sandbox.py`), against the live server: no user SQL reads a file, reaches the network,
reads a setting or the environment, loads an extension or changes the engine's configuration.

The walk takes the engines' own catalogues (DuckDB's `duckdb_functions()`, SQLite's `pragma_function_list`
and `pragma_list`) and sends each table function, and each function whose name or description speaks of
files, settings, the environment or extensions, through every way SQL comes in: `/api/sql/query` (a planned
SELECT, and a SELECT over an uploaded file), an agent's `sql_db_query` and the MCP `query` tool. Then the
engines themselves are shown to hold with the name fence out of the way.
"""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agentkb.agents import files_db
from agentkb.destinations import DataSourcePolicy
from agentkb.errors import BadRequest
from agentkb.ingest.files.tables import Tabular
from agentkb.secrecy import KEY_FILE_NAME
from agentkb.sql import datasources, frames, sandbox
from tests.openai_stub import OpenAIStub, Reply, text

P = "/api/projects/mindsdb"
PASSWD = "/etc/passwd"
ISSUE_QUERY = "SELECT (SELECT content FROM read_text('{path}')) AS x FROM (SELECT * FROM information_schema.databases) AS d"
# A function whose name or description says it touches files, settings, the environment or extensions.
FLAGGED_NAME = re.compile(
    r"^(read_|glob|sniff_|parquet_|getenv|current_setting|duckdb_|pragma_|sqlite_|postgres_|mysql_|http|"
    r"json_execute|write_|load_|install|__internal|readfile|writefile|edit$|fsdir|zipfile|sqlar_|fts3_tokenizer)",
    re.IGNORECASE,
)
FLAGGED_DESCRIPTION = re.compile(
    r"\b(configuration|environment|logger|file system|secrets?)\b", re.IGNORECASE
)
# The SQLite shell's file functions: absent from the library's catalogue, refused all the same.
SQLITE_SHELL_FUNCTIONS = ("readfile", "writefile", "edit", "fsdir", "zipfile")


# --- the engines' catalogues --------------------------------------------------------------------------------


def duckdb_catalogue() -> tuple[list[str], list[str], int]:
    """(table functions, flagged scalar/aggregate/macro functions, all distinct names) of DuckDB."""
    con = duckdb.connect()
    try:
        rows = con.execute(
            "SELECT function_name, function_type, coalesce(description, '') FROM duckdb_functions()"
        ).fetchall()
    finally:
        con.close()
    tables = sorted({n for n, kind, _ in rows if kind in ("table", "table_macro", "pragma")})
    flagged = sorted(
        {
            n
            for n, kind, description in rows
            if kind not in ("table", "table_macro", "pragma")
            and (FLAGGED_NAME.match(n) or FLAGGED_DESCRIPTION.search(description))
        }
    )
    return tables, flagged, len({n for n, _, _ in rows})


def sqlite_catalogue() -> tuple[list[str], list[str], int]:
    """(pragma table functions, flagged functions, all distinct function names) of SQLite."""
    con = sqlite3.connect(":memory:")
    try:
        functions = {str(r[0]) for r in con.execute("SELECT name FROM pragma_function_list")}
        pragmas = sorted(f"pragma_{r[0]}" for r in con.execute("SELECT name FROM pragma_pragma_list"))
    finally:
        con.close()
    flagged = sorted({n for n in functions if FLAGGED_NAME.match(n)} | set(SQLITE_SHELL_FUNCTIONS))
    return pragmas, flagged, len(functions)


DUCK_TABLES, DUCK_FLAGGED, DUCK_ALL = duckdb_catalogue()
LITE_TABLES, LITE_FLAGGED, LITE_ALL = sqlite_catalogue()


def _is_refusal(fn: str, is_error: bool, message: str) -> bool:
    """An error that names the function, or one where the parser itself refused the text (a name that is
    also a keyword, or arguments the parser checks): in both the statement never reached an engine."""
    if not is_error:
        return False
    return fn.lower() in message.lower() or "cannot be parsed" in message or "cannot be planned" in message


# --- what the walk sends ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def table_file(base_url: str) -> Iterator[str]:
    """An uploaded CSV, readable as `files.<name>`."""
    name = f"sandbox_{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=base_url, timeout=60) as c:
        r = c.put(f"/api/files/{name}", files={"file": ("t.csv", "id,name\n1,alpha\n2,beta\n", "text/csv")})
        assert r.status_code == 200, r.text
        yield name
        c.delete(f"/api/files/{name}")


def sql(client: httpx.Client, query: str) -> tuple[bool, str, str]:
    """(an error answer, its message, the whole response text). The endpoint answers every SQL error as
    MindsDB does: HTTP 200 with `{"type": "error", "error_message": ...}`."""
    r = client.post("/api/sql/query", json={"query": query, "context": {"db": "mindsdb"}})
    assert r.status_code == 200, r.text
    body = r.json()
    return body["type"] == "error", str(body.get("error_message", "")), r.text


def fenced_queries(table: str) -> list[tuple[str, str]]:
    """(function, query) for the agent and MCP paths: table functions beside an allowed table, the others in
    the select list."""
    queries = [(fn, f"SELECT * FROM files.{table} AS f, {fn}('x') AS t") for fn in DUCK_TABLES + LITE_TABLES]
    return queries + [(fn, f"SELECT {fn}('x') AS v FROM files.{table}") for fn in DUCK_FLAGGED + LITE_FLAGGED]


def test_the_catalogues_are_walked() -> None:
    """The walk covers what it says: every table function of both engines, and the flagged functions (the
    file, settings and extension functions among them)."""
    assert len(DUCK_TABLES) > 100 and {"read_text", "read_csv", "glob", "query_table"} <= set(DUCK_TABLES)
    assert {"current_setting", "write_log"} <= set(DUCK_FLAGGED)
    assert {"pragma_function_list", "pragma_database_list"} <= set(LITE_TABLES)
    assert {"load_extension", "readfile", "writefile", "fts3_tokenizer"} <= set(LITE_FLAGGED)


def test_every_catalogued_function_is_refused_through_sql_query(
    client: httpx.Client, table_file: str
) -> None:
    failures: list[str] = []
    for fn in DUCK_TABLES + LITE_TABLES:
        for query in (
            f"SELECT (SELECT 1 FROM {fn}('x')) AS x FROM (SELECT * FROM information_schema.databases) AS d",
            f"SELECT (SELECT 1 FROM {fn}('x')) AS x FROM files.{table_file} AS f",
        ):
            is_error, message, whole = sql(client, query)
            if not _is_refusal(fn, is_error, message):
                failures.append(f"{query} -> {whole[:200]}")
    for fn in DUCK_FLAGGED + LITE_FLAGGED:
        for query in (
            f"SELECT {fn}('x') AS v FROM (SELECT * FROM information_schema.databases) AS d",
            f"SELECT {fn}('x') AS v FROM files.{table_file}",
        ):
            is_error, message, whole = sql(client, query)
            if not _is_refusal(fn, is_error, message):
                failures.append(f"{query} -> {whole[:200]}")
    assert not failures, "\n".join(failures)


def test_every_catalogued_function_is_refused_through_an_agents_sql_tool(
    client: httpx.Client, stub: OpenAIStub, table_file: str, unique: str
) -> None:
    queries = fenced_queries(table_file)
    agent = f"sandbox_agent_{unique}"
    body = {
        "agent": {
            "name": agent,
            "model": stub.chat_model(),
            "data": {"tables": [f"files.{table_file}"]},
            "params": {"max_iterations": len(queries) + 5},
        }
    }
    assert client.post(f"{P}/agents", json=body).status_code == 201
    calls = tuple(("sql_db_query", {"tool_input": q}) for _, q in queries)
    stub.script(
        Reply(tool_calls=((("sql_db_query", {"tool_input": f"SELECT name FROM files.{table_file}"})),)),
        Reply(tool_calls=calls),
        text("done"),
    )
    r = client.post(
        f"{P}/agents/{agent}/completions", json={"messages": [{"question": "go", "answer": None}]}
    )
    assert r.status_code == 200, r.text
    seen = [str(m["content"]) for m in stub.requests[-1].messages if m.get("role") == "tool"]
    assert seen[0].endswith("name\r\nalpha\r\nbeta\r\n")  # the tool reads the allowed table
    failures = [
        f"{q} -> {answer[:200]}"
        for (fn, q), answer in zip(queries, seen[1:], strict=True)
        if not (answer.startswith("Error:") and _is_refusal(fn, True, answer))
    ]
    assert not failures, "\n".join(failures)


async def test_every_catalogued_function_is_refused_through_mcp_query(base_url: str, table_file: str) -> None:
    failures: list[str] = []
    client = Client(streamable_http_client(f"{base_url}/mcp", http_client=httpx2.AsyncClient(timeout=60)))
    async with client:
        allowed = await client.call_tool("query", {"query": f"SELECT name FROM files.{table_file}"})
        assert not allowed.is_error and allowed.structured_content["data"] == [["alpha"], ["beta"]]
        for fn, query in fenced_queries(table_file):
            result = await client.call_tool("query", {"query": query})
            message = str(result.content[0].text)
            if not (result.is_error and _is_refusal(fn, True, message)):
                failures.append(f"{query} -> {message[:200]}")
    assert not failures, "\n".join(failures)


# --- the attacks, one by one ----------------------------------------------------------------------------------


def refused(client: httpx.Client, query: str, name: str | None = None) -> tuple[str, str]:
    """Send `query`; assert it is answered with an error (naming `name`); (the message, the response)."""
    is_error, message, whole = sql(client, query)
    assert is_error, whole
    if name is not None:
        assert name in message, message
    return message, whole


def test_the_issue_query_is_refused_never_answered_with_the_file(client: httpx.Client, settings: Any) -> None:
    passwd = Path(PASSWD).read_text()
    message, whole = refused(client, ISSUE_QUERY.format(path=PASSWD), "read_text()")
    assert message.startswith("The table function read_text() is not allowed")
    assert "root:" not in whole and passwd[:40] not in whole

    key_file = Path(settings.data_dir) / KEY_FILE_NAME
    key = key_file.read_text().strip() if key_file.exists() else None
    for query, name in (
        (ISSUE_QUERY.format(path=key_file), "read_text"),
        (
            f"SELECT (SELECT content FROM read_blob('{key_file}')) AS x "
            "FROM (SELECT * FROM information_schema.databases) AS d",
            "read_blob",
        ),
        (f"SELECT * FROM read_csv('{key_file}')", "read_csv"),
        (f"SELECT * FROM read_text('{key_file}')", "read_text"),
    ):
        _, whole = refused(client, query, name)
        if key:
            assert key not in whole


@pytest.mark.parametrize(
    ("query", "name"),
    [
        (f"SELECT * FROM read_csv('{PASSWD}')", "read_csv"),
        (f"SELECT * FROM read_text('{PASSWD}')", "read_text"),
        (f"SELECT * FROM read_blob('{PASSWD}')", "read_blob"),
        ("SELECT * FROM glob('/etc/*')", "glob"),
        ("SELECT * FROM read_parquet('/tmp/x.parquet')", "read_parquet"),
        ("SELECT * FROM read_json('/tmp/x.json')", "read_json"),
        (f"SELECT * FROM sniff_csv('{PASSWD}')", "sniff_csv"),
        ("SELECT * FROM parquet_metadata('/tmp/x.parquet')", "parquet_metadata"),
        ("SELECT * FROM sqlite_scan('/tmp/x.db', 't')", "sqlite_scan"),
        ("SELECT * FROM postgres_scan('host=localhost', 'public', 't')", "postgres_scan"),
        ("SELECT * FROM query_table('t')", "query_table"),
        ("SELECT * FROM duckdb_settings(1)", "duckdb_settings"),
        ("SELECT getenv('HOME') AS h FROM (SELECT * FROM information_schema.databases) AS d", "getenv"),
        ("SELECT current_setting('secret_directory') AS s FROM files.{t}", "current_setting"),
        ("SELECT (SELECT count(*) FROM duckdb_settings(1)) AS n FROM files.{t}", "duckdb_settings"),
        ("SELECT (SELECT 1 FROM `s3://bucket/key.csv`) AS x FROM (SELECT * FROM information_schema.databases) AS d", "s3://"),
        ("SELECT (SELECT 1 FROM `http://127.0.0.1:9/x.csv`) AS x FROM (SELECT * FROM information_schema.databases) AS d", "http://"),
    ],
)  # fmt: skip
def test_direct_forms_are_refused(client: httpx.Client, table_file: str, query: str, name: str) -> None:
    message, _ = refused(client, query.replace("{t}", table_file), name)
    assert "is not allowed" in message or "is not a table of this query" in message, message


@pytest.mark.parametrize(
    "query",
    [
        "SET enable_external_access = true",
        "SET lock_configuration = false",
        "RESET enable_external_access",
        "PRAGMA enable_external_access = true",
        "PRAGMA version",
        "COPY (SELECT 1) TO '/tmp/agentkb_copy_{fresh}.csv'",
        "ATTACH '/tmp/agentkb_attached_{fresh}.db' AS other",
        "INSTALL httpfs",
        "LOAD httpfs",
    ],
)
def test_statements_that_reach_outside_are_refused(client: httpx.Client, query: str) -> None:
    query = query.replace("{fresh}", uuid.uuid4().hex)  # a new path each run; the test's id stays the same
    refused(client, query)
    if query.startswith(("COPY", "ATTACH")):
        assert not Path(query.split("'")[1]).exists()
    # the engine is as locked as before: the issue's query is still refused
    refused(client, ISSUE_QUERY.format(path=PASSWD), "read_text()")


@pytest.mark.parametrize(
    "query",
    [
        "SELECT pg_read_file('/etc/passwd') FROM {t}",
        "SELECT pg_read_binary_file('/etc/passwd') FROM {t}",
        "SELECT * FROM {t}, pg_ls_dir('/') AS d",
        "SELECT lo_import('/etc/passwd') FROM {t}",
        "SELECT lo_export(1, '/tmp/x') FROM {t}",
        "SELECT * FROM {t}, dblink('host=x', 'select 1') AS d",
        "SELECT load_file('/etc/passwd') FROM {t}",
        "SELECT load_extension('/tmp/x.so') FROM {t}",
        "SELECT readfile('/etc/passwd') FROM {t}",
        "SELECT writefile('/tmp/x', 'y') FROM {t}",
        "SELECT * FROM {t} INTO OUTFILE '/tmp/x'",
        "SELECT * FROM {t} INTO DUMPFILE '/tmp/x'",
        "COPY {t} TO PROGRAM 'id'",
        "ATTACH DATABASE '/tmp/x.db' AS other",
    ],
)
async def test_remote_engines_file_functions_are_refused_before_they_are_sent(
    base_url: str, table_file: str, query: str
) -> None:
    """Through MCP `query` (the agents' fence and pushdown's parse): refused before any engine sees them."""
    client = Client(streamable_http_client(f"{base_url}/mcp", http_client=httpx2.AsyncClient(timeout=60)))
    async with client:
        result = await client.call_tool("query", {"query": query.format(t=f"files.{table_file}")})
    assert result.is_error
    message = str(result.content[0].text)
    assert "not allowed" in message or "cannot be parsed" in message, message


# --- the engines themselves, without the name fence ---------------------------------------------------------


@pytest.fixture
def no_name_fence(monkeypatch: pytest.MonkeyPatch) -> None:
    """Take the name fence away, to show what the engines alone still refuse."""
    monkeypatch.setattr(sandbox, "check_duckdb", lambda sql, tables: None)


FRAME = frames.Frame(["id", "name"], [[1, "alpha"], [2, "beta"]])


DISABLED = "disabled by configuration"


@pytest.mark.usefixtures("no_name_fence")
@pytest.mark.parametrize(
    ("query", "answer"),
    [
        (f"SELECT (SELECT content FROM read_text('{PASSWD}')) AS x FROM t", DISABLED),
        (f"SELECT * FROM read_csv('{PASSWD}')", DISABLED),
        (f"SELECT * FROM read_blob('{PASSWD}')", DISABLED),
        ("SELECT * FROM glob('/etc/*')", DISABLED),
        ("SELECT * FROM 'http://127.0.0.1:9/x.csv'", DISABLED),
        (f"SELECT * FROM '{PASSWD}'", "does not exist"),  # no file read by a replacement scan
        ("LOAD httpfs", "disabled through configuration"),
        ("INSTALL httpfs", DISABLED),
        ("ATTACH '/tmp/agentkb_sandbox_{fresh}.db' AS other", DISABLED),
        ("COPY t TO '/tmp/agentkb_sandbox_{fresh}.csv'", DISABLED),
    ],
)
def test_the_planners_duckdb_reaches_nothing_outside(query: str, answer: str) -> None:
    """The name fence taken away, the planner's own DuckDB (`frames.query`) still reads no file."""
    query = query.replace("{fresh}", uuid.uuid4().hex)
    with pytest.raises(BadRequest) as refused:
        frames.query({"t": FRAME}, query)
    assert answer in str(refused.value.detail) and "root:" not in str(refused.value.detail)
    if query.startswith(("COPY", "ATTACH")):
        assert not Path(query.split("'")[1]).exists()


@pytest.mark.parametrize(
    "statement",
    [
        "SET enable_external_access = true",
        "RESET enable_external_access",
        "PRAGMA enable_external_access = true",
        "SET GLOBAL enable_external_access = true",
        "SET lock_configuration = false",
        "RESET lock_configuration",
        "SET autoload_known_extensions = true",
        "SET allowed_directories = ['/']",
        "SET disabled_filesystems = ''",
    ],
)
def test_the_sandboxed_duckdb_cannot_be_unlocked(statement: str) -> None:
    con = sandbox.duckdb_connect()
    try:
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute(statement)
        with pytest.raises(duckdb.PermissionException, match=DISABLED):
            con.execute(f"SELECT content FROM read_text('{PASSWD}')")
    finally:
        con.close()


@pytest.mark.usefixtures("no_name_fence")
def test_the_planners_duckdb_still_joins_registered_frames() -> None:
    other = frames.Frame(["id", "score"], [[1, 0.5], [2, 0.25]])
    joined = frames.query(
        {"t": FRAME, "s": other}, "SELECT t.name, s.score FROM t JOIN s ON s.id = t.id ORDER BY 1"
    )
    assert joined.rows == [["alpha", 0.5], ["beta", 0.25]]
    con = sandbox.duckdb_connect()
    try:
        settings = dict(
            con.execute(
                "SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access', "
                "'lock_configuration', 'autoload_known_extensions', 'autoinstall_known_extensions')"
            ).fetchall()
        )
    finally:
        con.close()
    assert settings == {
        "enable_external_access": "false",
        "lock_configuration": "true",
        "autoload_known_extensions": "false",
        "autoinstall_known_extensions": "false",
    }


def _files_engine() -> Any:
    return files_db.load(
        {"t": Tabular(["id", "name"], [{"id": 1, "name": "alpha"}, {"id": 2, "name": "beta"}])}
    )


@pytest.mark.parametrize(
    "query",
    [
        "ATTACH DATABASE ':memory:' AS other",
        "ATTACH DATABASE '{tmp}/attached.db' AS other",
        "DETACH DATABASE main",
        "SELECT load_extension('/tmp/x.so')",
        "SELECT fts3_tokenizer('simple')",
        "PRAGMA query_only = OFF",
        "PRAGMA writable_schema = ON",
        "SELECT * FROM pragma_database_list",
        "INSERT INTO t VALUES (3, 'gamma')",
        "DELETE FROM t",
        "CREATE TABLE x (a)",
        "DROP TABLE t",
    ],
)
def test_the_agents_sqlite_only_reads(query: str, tmp_path: Path) -> None:
    engine = _files_engine()
    try:
        with engine.connect() as conn, pytest.raises(Exception, match="not authorized|too many attached"):
            conn.exec_driver_sql(query.replace("{tmp}", str(tmp_path)))
        with engine.connect() as conn:  # nothing changed, and reading (GLOB and LIKE too) still works
            rows = conn.exec_driver_sql("SELECT id, name FROM t WHERE name GLOB 'a*' OR name LIKE 'b%'").all()
            assert [tuple(r) for r in rows] == [(1, "alpha"), (2, "beta")]
    finally:
        engine.dispose()
    assert not (tmp_path / "attached.db").exists()


def test_a_sqlite_data_source_only_reads(tmp_path: Path) -> None:
    path = tmp_path / "source.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE animals (name TEXT)")
        conn.execute("INSERT INTO animals VALUES ('cheetah')")
    conn.close()
    engine = datasources.create("sqlite", {"db_file": str(path)}, DataSourcePolicy(file_dir=tmp_path))
    try:
        with engine.connect() as c:
            assert c.exec_driver_sql("SELECT name FROM animals").all() == [("cheetah",)]
        for query in (
            f"ATTACH DATABASE '{tmp_path / 'other.db'}' AS o",
            "SELECT load_extension('/tmp/x.so')",
        ):
            with engine.connect() as c, pytest.raises(Exception, match="not authorized|too many attached"):
                c.exec_driver_sql(query)
    finally:
        engine.dispose()
    assert not (tmp_path / "other.db").exists()


def test_the_walk_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    """The sizes of the catalogues walked, for the record."""
    summary = {
        "duckdb_functions": DUCK_ALL,
        "duckdb_table_functions": len(DUCK_TABLES),
        "duckdb_flagged": len(DUCK_FLAGGED),
        "sqlite_functions": LITE_ALL,
        "sqlite_pragma_tables": len(LITE_TABLES),
        "sqlite_flagged": len(LITE_FLAGGED),
    }
    with capsys.disabled():
        print("\nSQL sandbox walk:", json.dumps(summary))
    assert all(summary.values())
