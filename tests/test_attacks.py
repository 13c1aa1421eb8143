"""The negative suite: every attack class of docs/security.md tried against a live `agentkb serve` process
(its own data directory and embedded PostgreSQL, real HTTP), each asserting the clear refusal and that
nothing happened. The detailed tests of each control are named in docs/security.md; this file is the one
place that runs them all against the server as an operator starts it.

Two servers: a keyless one on loopback (the default install, the one a web page in the operator's browser
can reach) and one with a login and API keys (what a credential holder can do)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port
from tests.ingest.fixtures import make_docx
from tests.ingest.site import NOT_FOUND, Response, Site, html, links, prose
from tests.openai_stub import OpenAIStub
from tests.test_serve_restart import serve

P = "/api/projects/mindsdb"
MiB = 1 << 20
USER, PASSWORD = "admin", "a long passphrase nobody guesses"
LONG_LINK = "/" + "a" * 40 + "!"  # `(a+)+$` backtracks 2**40 times on it in Python's `re`


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKB_")}
    return {**env, "AGENTKB_DATA_DIR": str(data_dir), **extra}


@pytest.fixture(scope="module")
def keyless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`agentkb serve` as installed (no login, no key, loopback), with small parse limits and the crawler
    allowed on 127.0.0.1 (the test site is there): its URL and data directory."""
    data_dir = tmp_path_factory.mktemp("keyless")
    data_dir.chmod(0o755)
    port = free_port()
    env = _env(
        data_dir,
        AGENTKB_CRAWL_ALLOW_PRIVATE="true",
        AGENTKB_MAX_INFLATED_MEMBER_BYTES=str(MiB),
    )
    with serve(data_dir, port, env):
        yield f"http://127.0.0.1:{port}", data_dir


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """`agentkb serve` with a login, a full API key and a read-only one: its URL and the two keys."""
    data_dir = tmp_path_factory.mktemp("secured")
    data_dir.chmod(0o755)
    # blocks of a minute: the guessing test's requests stay inside one block however slow the machine is
    env = _env(data_dir, AGENTKB_USERNAME=USER, AGENTKB_PASSWORD=PASSWORD, AGENTKB_LOGIN_BACKOFF_S="60")
    keys = []
    for args in (["full"], ["reader", "--read-only"]):
        made = subprocess.run(
            [sys.executable, "-m", "agentkb", "keys", "create", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert made.returncode == 0, made.stderr
        keys.append(made.stdout.strip().splitlines()[-1])
    port = free_port()
    with serve(data_dir, port, env):
        url = f"http://127.0.0.1:{port}"
        # both keys in use before anyone guesses from this address: a credential the server has accepted keeps
        # working while the guessing blocks the address (the attacker and the users share 127.0.0.1 here)
        for key in keys:
            assert httpx.get(f"{url}/api/projects", headers={"X-Api-Key": key}, timeout=30).status_code == 200
        yield url, keys[0], keys[1]


def sql(url: str, query: str, **headers: str) -> httpx.Response:
    return httpx.post(f"{url}/api/sql/query", json={"query": query}, headers=headers, timeout=120)


# --- a credential holder reads the server's files through SQL --------------------------------------------


def test_sql_reads_no_file_of_the_server(keyless: tuple[str, Path]) -> None:
    url, data_dir = keyless
    secret_key = (data_dir / "secret.key").read_text().strip()
    attempts = [
        "SELECT (SELECT content FROM read_text('/etc/passwd')) AS x "
        "FROM (SELECT * FROM information_schema.databases) AS d",
        f"SELECT * FROM read_text('{data_dir}/secret.key')",
        f"SELECT * FROM read_blob('{data_dir}/secret.key')",
        f"SELECT * FROM read_csv('{data_dir}/secret.key')",
        "SELECT getenv('HOME') AS h FROM (SELECT * FROM information_schema.databases) AS d",
        "SET enable_external_access = true",
        f"COPY (SELECT 1) TO '{data_dir}/written.csv'",
        f"ATTACH '{data_dir}/attached.db'",
    ]
    for query in attempts:
        answer = sql(url, query)
        assert answer.status_code == 200, answer.text  # MindsDB's contract: errors are `type: error`
        body = answer.json()
        assert body["type"] == "error", (query, body)
        assert "root:" not in answer.text and secret_key not in answer.text, query
    assert not (data_dir / "written.csv").exists() and not (data_dir / "attached.db").exists()


# --- a stored key follows a changed endpoint ------------------------------------------------------------


def test_a_stored_key_never_follows_a_new_endpoint(keyless: tuple[str, Path]) -> None:
    url, _ = keyless
    key = "sk-live-attack-key-0123456789"
    with OpenAIStub() as home, OpenAIStub() as away, httpx.Client(base_url=url, timeout=120) as c:
        model = {**home.embedding_model(), "api_key": key}
        assert (
            c.post(
                f"{P}/knowledge_bases", json={"knowledge_base": {"name": "bound", "embedding_model": model}}
            ).status_code
            == 201
        )
        moved = sql(
            url, f"ALTER KNOWLEDGE_BASE bound USING embedding_model = {{'base_url': '{away.base_url}'}}"
        )
        assert moved.json()["type"] == "error" and "api_key" in moved.json()["error_message"], moved.text
        put = c.put(
            f"{P}/knowledge_bases/bound",
            json={
                "knowledge_base": {
                    "params": {"embedding_model": {"base_url": away.base_url, "api_key": "******"}}
                }
            },
        )
        assert put.status_code == 400 and "api_key" in put.json()["detail"], put.text
        assert c.get(f"{P}/knowledge_bases/bound").json()["embedding_model"]["base_url"] == home.base_url
        search = c.post(f"{P}/knowledge_bases/bound/search", json={"query": "anything"})
        assert search.status_code == 200, search.text
        assert away.requests == []  # the other server never heard of the key
        assert any(r.headers.get("authorization") == f"Bearer {key}" for r in home.requests)


# --- a web page in the operator's browser (DNS rebinding) -----------------------------------------------


def test_a_rebound_host_drives_nothing(keyless: tuple[str, Path]) -> None:
    url, _ = keyless
    port = url.rsplit(":", 1)[1]
    evil = {"Host": f"attacker.example:{port}"}
    answer = sql(url, "CREATE PROJECT rebound", **evil)
    assert answer.status_code == 400, answer.text
    assert answer.json()["title"] == "Invalid host header"
    assert httpx.get(f"{url}/api/projects", headers=evil).status_code == 400
    assert {"name": "rebound"} not in httpx.get(f"{url}/api/projects").json()
    assert httpx.get(f"{url}/api/projects", headers={"Host": f"localhost:{port}"}).status_code == 200


# --- one regex stalls the server ------------------------------------------------------------------------


class EvilSite(Site):
    """/ links a page the filters allow and a long `aaaa…!` link the catastrophic filter is tried on."""

    def route(self, path: str, headers: Mapping[str, str]) -> Response:
        if path == "/robots.txt":
            return Response(body=b"User-agent: *\nDisallow:\n", content_type="text/plain")
        if path == "/":
            return html("Start", "<h1>Start</h1>" + prose("start") + links("/page.html", LONG_LINK))
        if path == "/page.html":
            return html("Page", "<h1>Page</h1>" + prose("page"))
        return NOT_FOUND


def test_a_user_regex_cannot_stall_the_server(keyless: tuple[str, Path]) -> None:
    url, _ = keyless
    with EvilSite() as site, OpenAIStub() as stub, httpx.Client(base_url=url, timeout=120) as c:
        body = {"name": "redos", "embedding_model": stub.embedding_model()}
        assert c.post(f"{P}/knowledge_bases", json={"knowledge_base": body}).status_code == 201
        refused = c.put(
            f"{P}/knowledge_bases/redos",
            json={"knowledge_base": {"urls": [f"{site.url}/"], "filters": [r"https?://[^/]+/(?=docs)"]}},
        )
        assert refused.status_code == 400 and "look-ahead" in refused.json()["detail"], refused.text
        answer: dict[str, httpx.Response] = {}

        def crawl() -> None:
            filters = [r"https?://[^/]+/page\.html$", r"https?://[^/]+/(a+)+$"]
            crawl_body = {"urls": [f"{site.url}/"], "crawl_depth": 1, "filters": filters}
            with httpx.Client(base_url=url, timeout=300) as own:
                answer["put"] = own.put(f"{P}/knowledge_bases/redos", json={"knowledge_base": crawl_body})

        worker = threading.Thread(target=crawl)
        worker.start()
        health = [httpx.get(f"{url}/health", timeout=60).status_code for _ in range(3)]
        worker.join(timeout=300)
        assert not worker.is_alive()
        assert health == [200, 200, 200]
        assert answer["put"].status_code == 200, answer["put"].text
        assert LONG_LINK not in site.paths()
        assert c.get(f"{P}/knowledge_bases/redos").json()["document_count"] == 2


# --- password and key guessing --------------------------------------------------------------------------


def test_password_guessing_is_throttled(secured: tuple[str, str, str]) -> None:
    url, _, _ = secured
    answers = [
        httpx.post(f"{url}/api/login", json={"username": USER, "password": f"guess {i}"}, timeout=30)
        for i in range(12)
    ]
    statuses = [a.status_code for a in answers]
    assert statuses[:5] == [401] * 5 and set(statuses[5:]) == {429}, statuses
    assert int(answers[-1].headers["Retry-After"]) >= 1
    right = httpx.post(f"{url}/api/login", json={"username": USER, "password": PASSWORD}, timeout=30)
    assert right.status_code == 429  # no oracle while blocked: the right password is refused too
    metrics = httpx.get(f"{url}/metrics", headers={"X-Api-Key": secured[1]}, timeout=30).text
    assert "agentkb_login_throttled_total" in metrics


# --- a crafted file -------------------------------------------------------------------------------------


def test_an_office_bomb_is_refused_and_not_stored(keyless: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = keyless
    original = make_docx(tmp_path / "plain.docx").read_bytes()
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(original)) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf,
    ):
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "word/document.xml":
                data = data + b" " * (16 * MiB)  # inflates to 16 MiB, a few KiB deflated
            zf.writestr(info.filename, data)
    bomb = out.getvalue()
    assert len(bomb) < MiB
    answer = httpx.put(
        f"{url}/api/files/bomb", files={"file": ("bomb.docx", bomb)}, data={"original_file_name": "bomb.docx"}
    )
    assert answer.status_code == 413, answer.text
    assert "AGENTKB_MAX_INFLATED_MEMBER_BYTES" in answer.json()["detail"]
    assert all(f.get("name") != "bomb" for f in httpx.get(f"{url}/api/files").json())


# --- where the server connects on a user's behalf -------------------------------------------------------


def test_metadata_addresses_and_local_databases_are_refused(keyless: tuple[str, Path]) -> None:
    url, data_dir = keyless
    with httpx.Client(base_url=url, timeout=60) as c:
        metadata = {
            "provider": "openai",
            "model_name": "m",
            "api_key": "sk-x",
            "base_url": "http://169.254.169.254/v1",
        }
        kb = c.post(
            f"{P}/knowledge_bases", json={"knowledge_base": {"name": "imds", "embedding_model": metadata}}
        )
        assert kb.status_code == 400 and "169.254.169.254" in kb.json()["detail"], kb.text
        assert c.get(f"{P}/knowledge_bases/imds").status_code == 404
        own_db = {
            "name": "own",
            "engine": "postgres",
            "parameters": {"host": str(data_dir / "pg"), "user": "postgres", "database": "postgres"},
        }
        assert c.post("/api/databases", json=own_db).status_code == 400
        passwd = {"name": "passwd", "engine": "sqlite", "parameters": {"db_file": "/etc/passwd"}}
        assert c.post("/api/databases", json=passwd).status_code == 400
        names = [d["name"] for d in c.get("/api/databases").json()]
        assert "own" not in names and "passwd" not in names


# --- a read-only key writes nothing ---------------------------------------------------------------------


def test_a_read_only_key_reads_but_never_writes(secured: tuple[str, str, str]) -> None:
    url, full, reader = secured
    ro = {"X-Api-Key": reader}
    assert httpx.get(f"{url}/api/projects", headers=ro).status_code == 200
    created = httpx.post(f"{url}/api/projects", json={"name": "by_reader"}, headers=ro)
    assert created.status_code == 403 and "read-only" in created.json()["detail"], created.text
    agent = sql(url, "CREATE AGENT by_reader USING prompt_template = 'x'", **ro)
    assert agent.json()["type"] == "error" and "read-only" in agent.json()["error_message"], agent.text
    listed = httpx.get(f"{url}/api/projects", headers={"X-Api-Key": full}).json()
    assert {"name": "by_reader"} not in listed
    agents = httpx.get(f"{url}{P}/agents", headers={"X-Api-Key": full}).json()
    assert all(a["name"] != "by_reader" for a in agents)


# --- forged forwarded headers ---------------------------------------------------------------------------


def test_forwarded_headers_from_an_untrusted_peer_are_ignored(secured: tuple[str, str, str]) -> None:
    url, _, _ = secured
    page = httpx.get(f"{url}/console/login", headers={"X-Forwarded-Proto": "https"}, timeout=30)
    cookies = [v for v in page.headers.get_list("set-cookie") if v.startswith("agentkb_csrf=")]
    assert cookies and "Secure" not in cookies[0]  # only AGENTKB_TRUSTED_PROXIES may say the scheme


def test_the_keyless_server_stayed_healthy(keyless: tuple[str, Path]) -> None:
    """After every attack above, the server still answers and its database is as the attacks left it."""
    url, _ = keyless
    deadline = time.monotonic() + 30
    while httpx.get(f"{url}/health/ready", timeout=10).status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.2)
