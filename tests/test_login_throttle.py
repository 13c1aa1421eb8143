"""The login throttle over real HTTP (service/login_throttle.py): failed logins and invalid credentials
counted per user name and per client address in PostgreSQL, then refused with 429 and `Retry-After`,
the back-off doubling; shared by two servers on one database; the console's form; the metrics.

Each test logs in to a server of its own user name and sends from a loopback address of its own
(127.0.0.x: Linux routes the whole of 127/8 to the loopback interface), so the counts of one test never
reach another's.
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from tests.conftest import ServedApp
from tests.secret_helpers import fresh_database, libpq
from tests.test_auth import create_key

PASSWORD = "correct horse battery staple"
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture(scope="module")
def throttle_db(pg_url: str) -> Iterator[str]:
    with fresh_database(pg_url, f"throttle_{uuid.uuid4().hex[:8]}") as url:
        yield url


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("throttle-data")


@pytest.fixture(scope="module")
def keys(throttle_db: str, data_dir: Path) -> tuple[str, str]:
    """Two API keys made by `agentkb keys create`: one the tests use, one they never send before a block."""
    return create_key("used", throttle_db, data_dir), create_key("unused", throttle_db, data_dir)


def served(db_url: str, data_dir: Path, user: str, **settings: Any) -> ServedApp:
    from agentkb.settings import Settings

    values: dict[str, Any] = {"username": user, "password": PASSWORD, "worker_enabled": False, **settings}
    return ServedApp(Settings(database_url=db_url, data_dir=data_dir, **values))


def client(url: str, address: str) -> httpx.Client:
    """A client whose requests come from `address` (a loopback address)."""
    return httpx.Client(base_url=url, timeout=60, transport=httpx.HTTPTransport(local_address=address))


def log_in(c: httpx.Client, user: str, password: str) -> httpx.Response:
    return c.post("/api/login", json={"username": user, "password": password})


def assert_throttled(r: httpx.Response, most_s: float) -> int:
    """A 429 problem+json with a whole `Retry-After` in 1..most_s; that number."""
    assert r.status_code == 429, r.text
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers
    body = r.json()
    assert body["title"] == "Too many requests" and "try again in" in body["detail"], body
    wait = int(r.headers["retry-after"])
    assert 1 <= wait <= most_s, wait
    return wait


def scrape(c: httpx.Client, key: str) -> dict[tuple[str, str], float]:
    r = c.get("/metrics", headers={"X-Api-Key": key})
    assert r.status_code == 200, r.text
    found: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            if sample.name in ("agentkb_login_failures_total", "agentkb_login_throttled_total"):
                found[(sample.name, next(iter(sample.labels.values())))] = sample.value
    return found


def test_forty_wrong_passwords_then_429_even_for_the_right_one(
    throttle_db: str, data_dir: Path, keys: tuple[str, str]
) -> None:
    user = f"admin-{uuid.uuid4().hex[:6]}"
    with served(throttle_db, data_dir, user, login_backoff_s=60) as app, client(app.url, "127.0.0.11") as c:
        before = scrape(c, keys[0])
        answers = [log_in(c, user, f"guess {i}") for i in range(40)]
        assert [r.status_code for r in answers] == [401] * 5 + [429] * 35
        for r in answers[5:]:
            assert_throttled(r, 60)
        # the right password during the block is refused the same way: no oracle
        assert_throttled(log_in(c, user, PASSWORD), 60)
        after = scrape(c, keys[0])
    assert (
        after[("agentkb_login_failures_total", "password")]
        - before.get(("agentkb_login_failures_total", "password"), 0)
        == 5
    )
    assert (
        after[("agentkb_login_throttled_total", "login")]
        - before.get(("agentkb_login_throttled_total", "login"), 0)
        == 36
    )
    # the database holds counts by subject: no password, no user name
    with psycopg.connect(libpq(throttle_db)) as conn:
        rows = conn.execute("SELECT subject, failures FROM login_failures").fetchall()
    assert ("client:127.0.0.11", 5) in rows
    assert not any(user in subject or "guess" in subject for subject, _ in rows), rows
    assert not any(hashlib.sha256(user.encode()).hexdigest() in subject for subject, _ in rows), rows


def test_back_off_doubles_and_a_success_resets(throttle_db: str, data_dir: Path) -> None:
    user = f"admin-{uuid.uuid4().hex[:6]}"
    with served(throttle_db, data_dir, user, login_backoff_s=1) as app, client(app.url, "127.0.0.12") as c:
        assert [log_in(c, user, "wrong").status_code for _ in range(5)] == [401] * 5
        first = assert_throttled(log_in(c, user, PASSWORD), 1)
        time.sleep(first + 0.1)
        assert log_in(c, user, "wrong").status_code == 401  # the sixth failure: a block twice as long
        second = assert_throttled(log_in(c, user, PASSWORD), 2)
        assert second == 2
        time.sleep(second + 0.1)
        ok = log_in(c, user, PASSWORD)
        assert ok.status_code == 200, ok.text
        assert (
            c.get("/api/projects", headers={"Authorization": f"Bearer {ok.json()['token']}"}).status_code
            == 200
        )
        # the success started the count again: five free failures, then the first back-off
        assert [log_in(c, user, "wrong").status_code for _ in range(6)] == [401] * 5 + [429]


def test_user_name_and_client_address_are_counted_apart(throttle_db: str, data_dir: Path) -> None:
    user = f"admin-{uuid.uuid4().hex[:6]}"
    with (
        served(throttle_db, data_dir, user, login_backoff_s=60) as app,
        client(app.url, "127.0.0.13") as first,
        client(app.url, "127.0.0.14") as second,
    ):
        assert [log_in(first, user, "wrong").status_code for _ in range(5)] == [401] * 5
        # another address: its own count is fresh, but the user name is blocked wherever it comes from
        assert_throttled(log_in(second, user, PASSWORD), 60)
        assert log_in(second, "someone-else", "wrong").status_code == 401
        # the first address is blocked for every user name
        assert_throttled(log_in(first, "someone-else", "wrong"), 60)
        assert_throttled(log_in(first, "yet-another", PASSWORD), 60)


def test_console_login_form_shows_the_wait(throttle_db: str, data_dir: Path) -> None:
    user = f"admin-{uuid.uuid4().hex[:6]}"
    with (
        served(throttle_db, data_dir, user, login_backoff_s=60) as app,
        httpx.Client(
            base_url=app.url, timeout=60, transport=httpx.HTTPTransport(local_address="127.0.0.15")
        ) as c,
    ):
        csrf = CSRF.search(c.get("/console/login").text)
        assert csrf
        form = {"csrf_token": csrf.group(1), "username": user}
        for _ in range(5):
            wrong = c.post("/console/login", data={**form, "password": "wrong"})
            assert wrong.status_code == 401 and "Invalid username or password" in wrong.text
        blocked = c.post("/console/login", data={**form, "password": PASSWORD})
        assert blocked.status_code == 429
        assert blocked.headers["content-type"].startswith("text/html")
        assert 1 <= int(blocked.headers["retry-after"]) <= 60
        assert re.search(r'class="error-detail">Too many failed logins[^<]*try again in \d+ s<', blocked.text)
        assert "agentkb_console=" not in blocked.headers.get("set-cookie", "")
        # the form's API key field is throttled by the same address count
        keyed = c.post(
            "/console/login", data={"csrf_token": form["csrf_token"], "api_key": "akb_" + "x" * 43}
        )
        assert keyed.status_code == 429 and "Too many invalid credentials" in keyed.text


def test_two_servers_on_one_database_share_the_count(settings: Any) -> None:
    """Two servers (two processes' worth of services and pools) on the session's database: failures on
    one count on the other, for logins and for invalid credentials."""
    user = f"admin-{uuid.uuid4().hex[:6]}"
    login = {
        "username": user,
        "password": SecretStr(PASSWORD),
        "worker_enabled": False,
        "login_backoff_s": 60,
    }
    shared = settings.model_copy(update=login)
    with (
        ServedApp(shared) as one,
        ServedApp(shared) as two,
        client(one.url, "127.0.0.16") as a,
        client(two.url, "127.0.0.16") as b,
        client(one.url, "127.0.0.17") as keyed_a,
        client(two.url, "127.0.0.17") as keyed_b,
    ):
        assert [log_in(a, user, "wrong").status_code for _ in range(3)] == [401] * 3
        assert [log_in(b, user, "wrong").status_code for _ in range(2)] == [401] * 2
        assert_throttled(log_in(a, user, PASSWORD), 60)
        assert_throttled(log_in(b, user, PASSWORD), 60)
        # invalid credentials: three refused by one server, two by the other, then both answer 429
        bad = {"Authorization": "Bearer akb_" + "y" * 43}
        assert [keyed_a.get("/api/projects", headers=bad).status_code for _ in range(3)] == [401] * 3
        assert [keyed_b.get("/api/projects", headers=bad).status_code for _ in range(2)] == [401] * 2
        assert_throttled(keyed_a.get("/api/projects", headers=bad), 60)
        assert_throttled(keyed_b.get("/api/projects", headers=bad), 60)


def test_invalid_api_keys_are_throttled_before_the_lookup(
    throttle_db: str, data_dir: Path, keys: tuple[str, str]
) -> None:
    used, unused = keys
    user = f"admin-{uuid.uuid4().hex[:6]}"
    with (
        served(throttle_db, data_dir, user, login_backoff_s=60) as app,
        client(app.url, "127.0.0.18") as c,
        client(app.url, "127.0.0.19") as elsewhere,
    ):
        assert c.get("/api/projects", headers={"X-Api-Key": used}).status_code == 200
        before = scrape(c, used)
        guesses = [c.get("/api/projects", headers={"X-Api-Key": f"akb_{i:043d}"}) for i in range(8)]
        assert [r.status_code for r in guesses] == [401] * 5 + [429] * 3
        for r in guesses[5:]:
            assert_throttled(r, 60)
        # a Bearer guess and the OpenAI-compatible routes too (in OpenAI's error shape)
        assert_throttled(c.get("/api/projects", headers={"Authorization": "Bearer some-token"}), 60)
        openai = c.get("/v1/models", headers={"Authorization": "Bearer akb_" + "z" * 43})
        assert openai.status_code == 429 and openai.json()["error"]["message"].startswith("Too many")
        # a key never accepted by this server is refused unread: its use is not recorded
        assert_throttled(c.get("/api/projects", headers={"X-Api-Key": unused}), 60)
        with psycopg.connect(libpq(throttle_db)) as conn:
            last_used = conn.execute("SELECT last_used_at FROM api_keys WHERE name = 'unused'").fetchone()
        assert last_used == (None,)
        # a key the server has accepted keeps working from the blocked address; other addresses are apart
        assert c.get("/api/projects", headers={"X-Api-Key": used}).status_code == 200
        assert elsewhere.get("/api/projects", headers={"X-Api-Key": "akb_" + "w" * 43}).status_code == 401
        # a login from the blocked address is refused as well: one count per address
        assert_throttled(log_in(c, user, PASSWORD), 60)
        after = scrape(c, used)
    assert (
        after[("agentkb_login_failures_total", "credential")]
        - before.get(("agentkb_login_failures_total", "credential"), 0)
        == 6
    )  # five from the blocked address (then refused unread), one from the other
    assert (
        after[("agentkb_login_throttled_total", "credential")]
        - before.get(("agentkb_login_throttled_total", "credential"), 0)
        == 6
    )
