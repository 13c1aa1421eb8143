"""Who the server answers and believes, over real HTTP: the Host check (DNS rebinding), forwarded headers
trusted from the configured proxies only, the console's logout of a session opened with an API key, and
authentication kept on by the address the server is actually bound to."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from tests.conftest import ServedApp, free_port
from tests.helpers import assert_problem
from tests.secret_helpers import fresh_database

EVIL = "evil.example"


def refused_host(response: httpx.Response) -> str:
    body = assert_problem(response, 400)
    assert body["title"] == "Invalid host header"
    return body["detail"]


def with_settings(settings: Any, **changes: Any) -> Any:
    return settings.model_copy(update=changes)


# --- the Host check -----------------------------------------------------------------------------------------


def test_a_keyless_server_refuses_a_rebound_host_and_runs_nothing(base_url: str, unique: str) -> None:
    port = base_url.rsplit(":", 1)[1]
    project = f"rebound_{unique}"
    with httpx.Client(base_url=base_url, timeout=60) as client:
        sql = client.post(
            "/api/sql/query",
            json={"query": f"CREATE PROJECT {project}"},
            headers={"Host": f"{EVIL}:{port}"},
        )
        detail = refused_host(sql)
        assert EVIL in detail and "AGENTKB_ALLOWED_HOSTS" in detail and "DNS rebinding" in detail
        refused_host(client.get("/api/projects", headers={"Host": EVIL}))
        refused_host(client.post("/api/projects", json={"name": project}, headers={"Host": EVIL}))
        # the console and /mcp are behind the same check
        refused_host(client.get("/console/login", headers={"Host": EVIL}))
        hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        accept = {"Accept": "application/json, text/event-stream"}
        refused_host(client.post("/mcp", json=hello, headers={**accept, "Host": EVIL}))

        names = {p["name"] for p in client.get("/api/projects").json()}
        assert project not in names, "the refused statement ran"
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "LOCALHOST", "127.9.9.9"):
            answer = client.get("/api/projects", headers={"Host": host})
            assert answer.status_code == 200, (host, answer.text)
        # probes answer whatever the Host (Kubernetes sends the pod's address)
        for path in ("/health", "/health/ready"):
            assert client.get(path, headers={"Host": EVIL}).status_code == 200
            assert client.get(path, headers={"Host": "10.1.2.3:47334"}).status_code == 200


def test_a_request_without_a_host_header_is_refused(base_url: str) -> None:
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(b"GET /api/projects HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), head
    assert b"no Host header" in body and b"Invalid host header" in body


def test_allowed_hosts_add_names(settings: Any) -> None:
    allowed = with_settings(settings, allowed_hosts=["api.example.com", "*.corp.example", "10.0.0.0/8"])
    with ServedApp(allowed) as app, httpx.Client(base_url=app.url, timeout=60) as client:
        for host in (
            "api.example.com",
            "API.example.com:443",
            "a.b.corp.example",
            "10.2.3.4:8080",
            "localhost",
        ):
            assert client.get("/api/projects", headers={"Host": host}).status_code == 200, host
        for host in (
            EVIL,
            "corp.example",
            "api.example.com.evil.example",
            "11.0.0.1",
            "api.example.com@evil",
        ):
            detail = refused_host(client.get("/api/projects", headers={"Host": host}))
            assert "names of AGENTKB_ALLOWED_HOSTS" in detail
    anything = with_settings(settings, allowed_hosts=["*"])
    with ServedApp(anything) as app:
        assert httpx.get(f"{app.url}/api/projects", headers={"Host": EVIL}).status_code == 200


def test_allowed_hosts_and_trusted_proxies_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentkb.settings import Settings

    monkeypatch.setenv("AGENTKB_ALLOWED_HOSTS", " API.example.com , *.corp.example.,")
    monkeypatch.setenv("AGENTKB_TRUSTED_PROXIES", '["10.0.0.5", "10.1.0.0/16", "fd00::/8"]')
    read = Settings()
    assert read.allowed_hosts == ["api.example.com", "*.corp.example"]
    assert read.trusted_proxies == ["10.0.0.5", "10.1.0.0/16", "fd00::/8"]
    with pytest.raises(ValidationError, match=r"a wildcard is `\*` or `\*.example.com`"):
        Settings(allowed_hosts=["api*.example.com"])
    with pytest.raises(ValidationError, match="is not an IP address or network"):
        Settings(trusted_proxies=["proxy.internal"])


def test_a_server_with_auth_answers_any_host_unless_names_are_set(pg_url: str, tmp_path: Path) -> None:
    from agentkb.settings import Settings

    with fresh_database(pg_url, f"hosts_auth_{uuid.uuid4().hex[:8]}") as url:
        secured = Settings(
            database_url=url, data_dir=tmp_path, username="u", password="p", worker_enabled=False
        )
        with ServedApp(secured) as app:
            token = httpx.post(f"{app.url}/api/login", json={"username": "u", "password": "p"}).json()[
                "token"
            ]
            # its credentials protect it: another Host is let through to authentication
            assert httpx.get(f"{app.url}/api/projects", headers={"Host": EVIL}).status_code == 401
            ok = httpx.get(
                f"{app.url}/api/projects", headers={"Host": EVIL, "Authorization": f"Bearer {token}"}
            )
            assert ok.status_code == 200
        with ServedApp(with_settings(secured, allowed_hosts=["api.example.com"])) as app:
            refused_host(
                httpx.get(
                    f"{app.url}/api/projects", headers={"Host": EVIL, "Authorization": f"Bearer {token}"}
                )
            )
            named = httpx.get(
                f"{app.url}/api/projects",
                headers={"Host": "api.example.com", "Authorization": f"Bearer {token}"},
            )
            assert named.status_code == 200


# --- forwarded headers ----------------------------------------------------------------------------------------


def _csrf_cookie(url: str, **headers: str) -> str:
    page = httpx.get(f"{url}/console/login", headers=headers)
    assert page.status_code == 200, page.text
    return next(v for v in page.headers.get_list("set-cookie") if v.startswith("agentkb_csrf="))


def test_forwarded_proto_is_believed_from_a_trusted_proxy_only(settings: Any, base_url: str) -> None:
    https = {"X-Forwarded-Proto": "https"}
    assert "Secure" not in _csrf_cookie(base_url, **https)  # no trusted proxy: the header is ignored
    with ServedApp(with_settings(settings, trusted_proxies=["10.0.0.0/8"])) as app:  # not this peer
        assert "Secure" not in _csrf_cookie(app.url, **https)
    with ServedApp(with_settings(settings, trusted_proxies=["127.0.0.1"])) as app:
        assert "Secure" in _csrf_cookie(app.url, **https)
        assert "Secure" not in _csrf_cookie(app.url)


def test_forwarded_for_decides_the_rate_limit_subject_from_a_trusted_proxy_only(
    settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentkb.access")
    limited = with_settings(settings, rate_limit_per_min=2)
    with ServedApp(limited) as app:  # no trusted proxy: every request counts against the peer, 127.0.0.1
        answers = [
            httpx.get(f"{app.url}/api/projects", headers={"X-Forwarded-For": f"203.0.113.{i}"}).status_code
            for i in range(3)
        ]
        assert answers == [200, 200, 429]
    with ServedApp(with_settings(limited, trusted_proxies=["127.0.0.1"])) as app:
        answers = [
            httpx.get(f"{app.url}/api/projects", headers={"X-Forwarded-For": f"203.0.113.{i}"}).status_code
            for i in range(3)
        ]
        assert answers == [200, 200, 200]  # three clients behind the proxy, one request each
        same = [
            httpx.get(f"{app.url}/api/projects", headers={"X-Forwarded-For": "198.51.100.7"}).status_code
            for _ in range(3)
        ]
        assert same == [200, 200, 429]
    time.sleep(0.2)
    clients = {getattr(r, "client", None) for r in caplog.records if r.name == "agentkb.access"}
    assert "198.51.100.7" in clients and "127.0.0.1" in clients  # the access log names the client so decided


# --- the console's logout --------------------------------------------------------------------------------------


def _make_key(url: str, data_dir: Path, name: str) -> str:
    from agentkb.service.platform.auth import AuthService
    from agentkb.settings import Settings
    from agentkb.storage.db import Database

    async def make() -> str:
        db = Database(url, pool_size=1)
        try:
            return await AuthService(db, Settings(database_url=url, data_dir=data_dir)).create_key(name)
        finally:
            await db.close()

    return asyncio.run(make())


@pytest.fixture(scope="module")
def keyed(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServedApp, str]]:
    """A served agentkb whose only credential is an API key (a database of its own)."""
    from agentkb.settings import Settings

    data_dir = tmp_path_factory.mktemp("hosts-keyed")
    with fresh_database(pg_url, f"hosts_key_{uuid.uuid4().hex[:8]}") as url:
        settings = Settings(
            database_url=url, data_dir=data_dir, worker_enabled=False, trusted_proxies=["127.0.0.1"]
        )
        with ServedApp(settings) as app:
            yield app, _make_key(url, data_dir, "console")


def _console_login(client: httpx.Client, key: str, **headers: str) -> httpx.Response:
    form = client.get("/console/login")
    csrf = form.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
    done = client.post(
        "/console/login", data={"csrf_token": csrf, "api_key": key}, headers=headers, follow_redirects=False
    )
    assert done.status_code == 303, done.text
    return done


def test_console_logout_ends_a_session_opened_with_an_api_key(keyed: tuple[ServedApp, str]) -> None:
    app, key = keyed
    with httpx.Client(base_url=app.url, timeout=60) as proxied:  # from a trusted proxy, over https
        done = _console_login(proxied, key, **{"X-Forwarded-Proto": "https"})
        cookie = next(v for v in done.headers.get_list("set-cookie") if v.startswith("agentkb_console="))
        assert "Secure" in cookie and "Max-Age=" in cookie
    with httpx.Client(base_url=app.url, timeout=60) as client:
        done = _console_login(client, key)
        session = client.cookies["agentkb_console"]
        assert key not in done.headers["set-cookie"] and session != key  # a session, never the key
        csrf = client.cookies["agentkb_csrf"]
        page = client.get("/console/data_sources")
        assert page.status_code == 200, page.text

        out = client.post("/console/logout", data={"csrf_token": csrf}, follow_redirects=False)
        assert out.status_code == 303 and out.headers["location"] == "/console/login"

    # the old cookie, replayed, opens nothing: the login form, and 401 from the API
    with httpx.Client(base_url=app.url, timeout=60) as replay:
        replay.cookies.set("agentkb_console", session, domain="127.0.0.1", path="/console")
        again = replay.get("/console/data_sources", follow_redirects=False)
        assert again.status_code == 303 and again.headers["location"].startswith("/console/login")
    api = httpx.get(f"{app.url}/api/projects", headers={"Authorization": f"Bearer {session}"})
    assert api.status_code == 401
    # the key itself stays valid (it is revoked with `agentkb keys revoke`)
    assert httpx.get(f"{app.url}/api/projects", headers={"X-Api-Key": key}).status_code == 200


def test_a_key_session_ends_when_its_key_is_revoked(keyed: tuple[ServedApp, str]) -> None:
    from agentkb.service.platform.auth import AuthService

    app, key = keyed
    auth: AuthService = app.uvicorn.server.config.app.state.services.auth
    loop = app.uvicorn.server.servers[0].get_loop()
    other = asyncio.run_coroutine_threadsafe(auth.create_key("short-lived"), loop).result(30)
    session = asyncio.run_coroutine_threadsafe(auth.key_session(other), loop).result(30).token
    bearer = {"Authorization": f"Bearer {session}"}
    assert httpx.get(f"{app.url}/api/projects", headers=bearer).status_code == 200
    asyncio.run_coroutine_threadsafe(auth.revoke_key("short-lived"), loop).result(30)
    assert httpx.get(f"{app.url}/api/projects", headers=bearer).status_code == 401


# --- authentication kept on by the bound socket --------------------------------------------------------------


def _keyless_server(url: str, data_dir: Path, host: str) -> Any:
    """`agentkb serve`'s server (make_server) for an app with no credential configured, bound to `host`
    while the settings name the default 127.0.0.1 (as uvicorn's --fd or another binding would)."""
    from agentkb.app import create_app
    from agentkb.cli.server import make_server
    from agentkb.settings import Settings

    app = create_app(Settings(database_url=url, data_dir=data_dir, worker_enabled=False))
    server = make_server(app, host=host, port=free_port(), grace_s=5)
    server.settle_gc = False  # not this test process's collector
    return server


def _run(server: Any) -> threading.Thread:
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    return thread


def _non_loopback_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


def test_auth_is_on_when_the_bound_socket_is_not_loopback(pg_url: str, tmp_path: Path) -> None:
    with fresh_database(pg_url, f"hosts_bound_{uuid.uuid4().hex[:8]}") as url:
        loopback = _keyless_server(url, tmp_path, "127.0.0.1")
        thread = _run(loopback)
        try:
            base = f"http://127.0.0.1:{loopback.config.port}"
            assert httpx.get(f"{base}/api/status").json()["auth"]["http_auth_enabled"] is False
            assert httpx.get(f"{base}/api/projects").status_code == 200
        finally:
            loopback.should_exit = True
            thread.join(30)

        exposed = _keyless_server(url, tmp_path, "0.0.0.0")
        thread = _run(exposed)
        try:
            base = f"http://127.0.0.1:{exposed.config.port}"
            assert httpx.get(f"{base}/api/status").json()["auth"]["http_auth_enabled"] is True
            refused = httpx.get(f"{base}/api/projects")
            assert refused.status_code == 401 and refused.json()["title"] == "Unauthorized"
            assert httpx.get(f"{base}/health").status_code == 200
        finally:
            exposed.should_exit = True
            thread.join(30)


def test_a_request_reaching_a_non_loopback_address_turns_auth_on(pg_url: str, tmp_path: Path) -> None:
    """A server run by something else (plain uvicorn, no `agentkb serve`) learns it is exposed from the
    address a request arrived at."""
    from tests.uvicorn_thread import UvicornThread

    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback interface")
    from agentkb.app import create_app
    from agentkb.settings import Settings

    with fresh_database(pg_url, f"hosts_reached_{uuid.uuid4().hex[:8]}") as url:
        app = create_app(Settings(database_url=url, data_dir=tmp_path, worker_enabled=False))
        served = UvicornThread(app, host="0.0.0.0", proxy_headers=False)
        port = served.start()
        try:
            local = f"http://127.0.0.1:{port}"
            assert httpx.get(f"{local}/api/projects").status_code == 200  # reached on loopback only so far
            outside = httpx.get(f"http://{address}:{port}/api/projects", headers={"Host": "localhost"})
            assert outside.status_code == 401
            assert httpx.get(f"{local}/api/projects").status_code == 401  # exposed: auth stays on
            assert httpx.get(f"{local}/api/status").json()["auth"]["http_auth_enabled"] is True
        finally:
            served.stop()
