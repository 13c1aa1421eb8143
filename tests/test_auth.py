"""Authentication over real HTTP: a served agentkb with a login (AGENTKB_USERNAME/PASSWORD) and API keys made
by `agentkb keys create`, on a database of its own (a key in the session's shared database would turn auth
on for every other test).

The list of operations checked for a 401 is generated from the served `/openapi.json`, so a new route is
covered the day it is added; the public ones are named here, so a route cannot become public unnoticed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest

from tests.conftest import ServedApp, free_port

USER, PASSWORD = "admin", "correct horse battery staple"
KEY_LINE = re.compile(r"^akb_[A-Za-z0-9_-]{43}$")
# the operations open without a credential (besides health probes: any `/health...` path in the schema)
PUBLIC_OPERATIONS = {("GET", "/api/status"), ("POST", "/api/login")}
DUMMY = "authcheck1"


def _database(pg_url: str, name: str) -> str:
    """A new, empty database on the session's PostgreSQL server; its URL."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return urlsplit(pg_url)._replace(path=f"/{name}").geturl()


def _drop(pg_url: str, url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {urlsplit(url).path.lstrip('/')} WITH (FORCE)")


@pytest.fixture(scope="module")
def auth_db(pg_url: str) -> Iterator[str]:
    url = _database(pg_url, f"auth_{uuid.uuid4().hex[:8]}")
    yield url
    _drop(pg_url, url)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("auth-data")


def auth_settings(db_url: str, data_dir: Path, **overrides: Any) -> Any:
    from agentkb.settings import Settings

    # these tests send many refused credentials from one address: the login throttle (tested in
    # tests/test_login_throttle.py) is given room for them
    values: dict[str, Any] = {
        "username": USER,
        "password": PASSWORD,
        "worker_enabled": False,
        "login_free_attempts": 1000,
    }
    values.update(overrides)
    return Settings(database_url=db_url, data_dir=data_dir, **values)


@pytest.fixture(scope="module")
def secured(auth_db: str, data_dir: Path) -> Iterator[ServedApp]:
    with ServedApp(auth_settings(auth_db, data_dir)) as app:
        yield app


def cli_env(db_url: str, data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKB_")}
    return {**env, "AGENTKB_DATABASE_URL": db_url, "AGENTKB_DATA_DIR": str(data_dir), **extra}


def agentkb(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentkb", *args], env=env, capture_output=True, text=True, timeout=180
    )


def create_key(name: str, db_url: str, data_dir: Path) -> str:
    done = agentkb("keys", "create", name, env=cli_env(db_url, data_dir))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def api_key(auth_db: str, data_dir: Path) -> str:
    key = create_key(f"ci-{uuid.uuid4().hex[:6]}", auth_db, data_dir)
    assert KEY_LINE.match(key), key
    return key


def login(url: str, username: str = USER, password: str = PASSWORD) -> httpx.Response:
    return httpx.post(f"{url}/api/login", json={"username": username, "password": password}, timeout=30)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_unauthorized(response: httpx.Response, what: str) -> None:
    assert response.status_code == 401, f"{what}: {response.status_code} {response.text[:200]}"
    assert response.headers["www-authenticate"].startswith("Bearer"), what
    body = response.json()
    if response.request.url.path.startswith("/v1/"):  # the OpenAI-compatible routes answer as OpenAI does
        assert response.headers["content-type"] == "application/json", what
        assert body["error"]["code"] == "invalid_api_key" and body["error"]["message"], what
        return
    assert response.headers["content-type"].startswith("application/problem+json"), what
    assert body["title"] == "Unauthorized" and body["detail"], what


# --- every operation in the schema ------------------------------------------------------------------------


def operations(schema: dict[str, Any]) -> list[tuple[str, str]]:
    methods = {"get", "put", "post", "delete", "patch", "head", "options"}
    return [(m.upper(), p) for p, ops in schema["paths"].items() for m in ops if m in methods]


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", DUMMY, path)


def test_every_operation_in_the_schema_needs_a_credential(secured: ServedApp, api_key: str) -> None:
    schema_response = httpx.get(f"{secured.url}/openapi.json")
    assert schema_response.status_code == 200  # the schema is public (see docs/api.md, Authentication)
    schema = schema_response.json()
    ops = operations(schema)
    assert len(ops) >= 30, "the schema lost its operations: this test would prove nothing"
    public = PUBLIC_OPERATIONS | {("GET", p) for p in schema["paths"] if p.startswith("/health")}
    assert ("GET", "/health") in public and public <= set(ops)
    # the schema declares the same: exactly the public operations have no `security`
    undeclared = {
        (m.upper(), p) for p, o in schema["paths"].items() for m, op in o.items() if not op.get("security")
    }
    assert undeclared == public

    with httpx.Client(base_url=secured.url, timeout=60) as client:
        for method, path in ops:
            url = concrete(path)
            if (method, path) in public:
                assert client.request(method, url).status_code != 401, f"{method} {path} is public"
                continue
            assert_unauthorized(client.request(method, url), f"{method} {path} without a credential")
            wrong = client.request(method, url, headers=bearer("akb_" + "x" * 43))
            assert_unauthorized(wrong, f"{method} {path} with an unknown key")
            assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
            assert_unauthorized(
                client.request(method, url, headers={"X-Api-Key": "not-a-key"}), f"{method} {path} X-Api-Key"
            )
            assert_unauthorized(
                client.request(method, url, headers={"Authorization": f"Basic {api_key}"}),
                f"{method} {path} Basic",
            )
            # and a valid key gets through to the route (which answers 2xx, 400 or 404 for the dummy names)
            passed = client.request(method, url, headers={"X-Api-Key": api_key})
            assert passed.status_code != 401, f"{method} {path} refused a valid key: {passed.text[:200]}"

        # the docs pages are public too; a request for no route is 404 (mindsdb_sdk's login falls back on it)
        for page in ("/docs", "/redoc"):
            assert client.get(page).status_code == 200
        assert client.post("/cloud/login", json={"email": USER, "password": PASSWORD}).status_code == 404


def test_status_reports_whether_auth_is_on(secured: ServedApp, base_url: str, api_key: str) -> None:
    anonymous = httpx.get(f"{secured.url}/api/status").json()["auth"]
    assert anonymous == {"confirmed": False, "http_auth_enabled": True, "provider": "local"}
    with_key = httpx.get(f"{secured.url}/api/status", headers={"X-Api-Key": api_key}).json()["auth"]
    assert with_key == {"confirmed": True, "http_auth_enabled": True, "provider": "local"}
    # the session's shared server has no login and no key: auth is off there, and it says so
    assert httpx.get(f"{base_url}/api/status").json()["auth"] == {
        "confirmed": True,
        "http_auth_enabled": False,
        "provider": "disabled",
    }
    assert httpx.get(f"{base_url}/api/projects").status_code == 200


# --- login, logout, expiry ----------------------------------------------------------------------------------


def _session_rows(db_url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT * FROM auth_sessions").fetchall()


def test_login_token_works_across_processes_until_logout(
    secured: ServedApp, auth_db: str, data_dir: Path
) -> None:
    for username, password in ((USER, "wrong"), ("root", PASSWORD), ("", "")):
        assert_unauthorized(login(secured.url, username, password), f"login as {username!r}/{password!r}")
    assert_unauthorized(httpx.post(f"{secured.url}/api/login", json={}), "login with no fields")

    answer = login(secured.url)
    assert answer.status_code == 200
    token = answer.json()["token"]
    assert len(token) >= 40 and answer.json()["expires_in"] == 86400
    # stored as its SHA-256 only
    rows = _session_rows(auth_db)
    assert not any(token in str(value) for row in rows for value in row)
    assert any(hashlib.sha256(token.encode()).hexdigest() in row for row in rows)

    with ServedApp(auth_settings(auth_db, data_dir)) as other:  # another API process on the same database
        for url in (secured.url, other.url):
            assert httpx.get(f"{url}/api/projects", headers=bearer(token)).status_code == 200
        assert httpx.post(f"{other.url}/api/logout", headers=bearer(token)).status_code == 200
        for url in (secured.url, other.url):
            assert_unauthorized(
                httpx.get(f"{url}/api/projects", headers=bearer(token)), f"{url} after logout"
            )
    assert_unauthorized(httpx.post(f"{secured.url}/api/logout"), "logout without a credential")


def test_login_token_expires(auth_db: str, data_dir: Path) -> None:
    with ServedApp(auth_settings(auth_db, data_dir, token_ttl_s=1.5)) as short:
        answer = login(short.url)
        assert answer.json()["expires_in"] == 1.5
        token = answer.json()["token"]
        assert httpx.get(f"{short.url}/api/projects", headers=bearer(token)).status_code == 200
        time.sleep(2)
        assert_unauthorized(httpx.get(f"{short.url}/api/projects", headers=bearer(token)), "expired token")


def test_a_new_password_ends_the_sessions_of_the_old_one(
    secured: ServedApp, auth_db: str, data_dir: Path
) -> None:
    token = login(secured.url).json()["token"]
    with ServedApp(auth_settings(auth_db, data_dir, password="a new password")) as changed:
        assert_unauthorized(
            httpx.get(f"{changed.url}/api/projects", headers=bearer(token)), "old password's token"
        )
        assert_unauthorized(login(changed.url), "login with the old password")
        assert login(changed.url, password="a new password").status_code == 200
    assert httpx.get(f"{secured.url}/api/projects", headers=bearer(token)).status_code == 200


# --- API keys -----------------------------------------------------------------------------------------------


def test_api_keys_cli_both_headers_and_revoke(secured: ServedApp, auth_db: str, data_dir: Path) -> None:
    env = cli_env(auth_db, data_dir)
    name = f"robot-{uuid.uuid4().hex[:6]}"
    created = agentkb("keys", "create", name, env=env)
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip().splitlines()[-1]  # the last line is the key alone
    assert KEY_LINE.match(key), created.stdout
    assert agentkb("keys", "create", name, env=env).returncode == 1  # names are unique

    projects = f"{secured.url}/api/projects"
    assert httpx.get(projects, headers={"X-Api-Key": key}).status_code == 200
    assert httpx.get(projects, headers={"Authorization": f"Bearer {key}"}).status_code == 200
    assert httpx.get(projects, headers={"authorization": f"bearer {key}"}).status_code == 200

    listed = agentkb("keys", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    line = next(row for row in listed.stdout.splitlines() if row.startswith(name + " "))
    assert "never" not in line, f"last use not recorded: {line}"  # created and last used are both dates
    assert key not in listed.stdout and key[4:] not in listed.stdout
    with psycopg.connect(auth_db) as conn:
        stored = conn.execute("SELECT key_hash FROM api_keys WHERE name = %s", (name,)).fetchone()
    assert stored == (hashlib.sha256(key.encode()).hexdigest(),)

    revoked = agentkb("keys", "revoke", name, env=env)
    assert revoked.returncode == 0, revoked.stderr
    # at once: no cache to wait out
    assert_unauthorized(httpx.get(projects, headers={"X-Api-Key": key}), "revoked key")
    assert_unauthorized(httpx.get(projects, headers=bearer(key)), "revoked key as Bearer")
    assert name not in agentkb("keys", "list", env=env).stdout
    assert agentkb("keys", "revoke", name, env=env).returncode == 1


# --- the MindsDB SDK, unchanged ----------------------------------------------------------------------------


def _sdk_session(server: Any, kb_name: str) -> None:
    assert "mindsdb" in [p.name for p in server.list_projects()]
    project = server.get_project("mindsdb")
    kb = project.knowledge_bases.create(kb_name)
    try:
        kb.insert(
            [
                {"id": 1, "content": "Reset the router by holding the button for ten seconds."},
                {"id": 2, "content": "Invoices are emailed on the first working day of each month."},
            ]
        )
        found = kb.find("how do I restart the router?", limit=1).fetch()
        assert list(found["id"]) == ["1"] or list(found["id"]) == [1]
    finally:
        project.knowledge_bases.drop(kb_name)


def test_mindsdb_sdk_with_login_and_with_api_key(secured: ServedApp, api_key: str) -> None:
    mindsdb_sdk = pytest.importorskip("mindsdb_sdk")
    import requests

    with pytest.raises(requests.HTTPError, match="Unauthorized") as refused:
        mindsdb_sdk.connect(secured.url).list_projects()
    assert refused.value.response.status_code == 401
    with pytest.raises(requests.HTTPError, match="Unauthorized"):
        mindsdb_sdk.connect(secured.url, login=USER, password="wrong")

    by_login = mindsdb_sdk.connect(secured.url, login=USER, password=PASSWORD)
    assert by_login.api.session.headers["Authorization"].startswith("Bearer ")
    _sdk_session(by_login, f"sdk_login_{uuid.uuid4().hex[:6]}")

    by_key = mindsdb_sdk.connect(secured.url, api_key=api_key)
    assert "Authorization" not in by_key.api.session.headers  # the SDK sends X-Api-Key
    _sdk_session(by_key, f"sdk_key_{uuid.uuid4().hex[:6]}")


def test_mindsdb_sdk_logs_in_again_when_its_token_expires(auth_db: str, data_dir: Path) -> None:
    mindsdb_sdk = pytest.importorskip("mindsdb_sdk")
    with ServedApp(auth_settings(auth_db, data_dir, token_ttl_s=1)) as short:
        server = mindsdb_sdk.connect(short.url, login=USER, password=PASSWORD)
        first = server.api.session.headers["Authorization"]
        assert "mindsdb" in [p.name for p in server.list_projects()]
        time.sleep(1.5)
        assert "mindsdb" in [p.name for p in server.list_projects()]  # a 401, then the SDK's own re-login
        assert server.api.session.headers["Authorization"] != first


# --- rate limit ---------------------------------------------------------------------------------------------


def test_rate_limit_per_credential(auth_db: str, data_dir: Path, api_key: str) -> None:
    other_key = create_key(f"other-{uuid.uuid4().hex[:6]}", auth_db, data_dir)
    with ServedApp(auth_settings(auth_db, data_dir, rate_limit_per_min=3)) as limited:
        projects = f"{limited.url}/api/projects"
        for _ in range(3):
            assert httpx.get(projects, headers={"X-Api-Key": api_key}).status_code == 200
        refused = httpx.get(projects, headers={"X-Api-Key": api_key})
        assert refused.status_code == 429
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert refused.json()["title"] == "Too many requests"
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        # counted per credential: another key (and health probes) still pass
        assert httpx.get(projects, headers={"X-Api-Key": other_key}).status_code == 200
        for _ in range(5):
            assert httpx.get(f"{limited.url}/health").status_code == 200


# --- nothing secret in the logs -----------------------------------------------------------------------------


def test_credentials_are_never_logged(
    secured: ServedApp, api_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    token = login(secured.url).json()["token"]
    assert_unauthorized(login(secured.url, password="a wrong guess"), "wrong password")
    httpx.get(f"{secured.url}/api/projects", headers=bearer(token))
    httpx.get(f"{secured.url}/api/projects", headers={"X-Api-Key": api_key})
    httpx.get(f"{secured.url}/api/projects", headers={"X-Api-Key": api_key + "x"})
    time.sleep(0.2)
    access = [r for r in caplog.records if r.name == "agentkb.access"]
    assert any("/api/login" in r.getMessage() for r in access), "no access log captured: the check is void"
    for record in caplog.records:
        text = record.getMessage() + repr(vars(record))
        for secret in (token, api_key, PASSWORD, "a wrong guess"):
            assert secret not in text, f"{record.name} logged a credential"


# --- serve on a non-loopback interface ----------------------------------------------------------------------


def _serve(env: dict[str, str], port: int, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentkb", "serve", "--host", "0.0.0.0", "--port", str(port), *flags],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _status_when_up(proc: subprocess.Popen[str], port: int) -> dict[str, Any]:
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/api/status", timeout=1)
                if answer.status_code == 200:
                    return dict(answer.json()["auth"])
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


def test_serve_refuses_a_non_loopback_host_without_auth(pg_url: str, tmp_path: Path) -> None:
    db = _database(pg_url, f"exposed_{uuid.uuid4().hex[:8]}")
    try:
        env = cli_env(db, tmp_path)
        port = free_port()
        refused = _serve(env, port)
        _, stderr = refused.communicate(timeout=120)
        assert refused.returncode == 2, stderr
        for hint in ("AGENTKB_USERNAME", "AGENTKB_PASSWORD", "agentkb keys create", "--allow-no-auth"):
            assert hint in stderr, f"{hint} missing from: {stderr}"
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/api/status", timeout=1)

        assert _status_when_up(_serve(env, port, "--allow-no-auth"), port)["http_auth_enabled"] is False
        with_login = {**env, "AGENTKB_USERNAME": USER, "AGENTKB_PASSWORD": PASSWORD}
        assert _status_when_up(_serve(with_login, port), port)["http_auth_enabled"] is True
        create_key("exposed", db, tmp_path)
        assert _status_when_up(_serve(env, port), port)["http_auth_enabled"] is True
    finally:
        _drop(pg_url, db)


def test_an_exposed_server_stays_closed_when_no_credential_exists(pg_url: str, tmp_path: Path) -> None:
    """Revoking the last key of a server bound to a public interface does not open it."""
    from agentkb.settings import Settings

    db = _database(pg_url, f"closed_{uuid.uuid4().hex[:8]}")
    try:
        settings = Settings(database_url=db, data_dir=tmp_path, host="0.0.0.0", worker_enabled=False)
        with ServedApp(settings) as app:  # bound to 127.0.0.1 by the fixture; configured as if exposed
            assert httpx.get(f"{app.url}/api/status").json()["auth"]["http_auth_enabled"] is True
            assert_unauthorized(httpx.get(f"{app.url}/api/projects"), "exposed server with no credential")
            assert httpx.get(f"{app.url}/health").status_code == 200
    finally:
        _drop(pg_url, db)
