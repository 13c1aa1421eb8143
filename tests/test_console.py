"""The web console over real HTTP (no browser): its pages, forms and streams on the real services, its
CSRF protection, and its login when authentication is on. tests/test_console_browser.py drives it in
Chromium."""

from __future__ import annotations

import http.server
import json
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ServedApp
from tests.helpers import served_with_login

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
USER, PASSWORD = "console-admin", "a console password"


def csrf_of(page: httpx.Response) -> str:
    found = CSRF.search(page.text)
    assert found, page.text[:500]
    return found.group(1)


def events(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.headers["content-type"].startswith("text/event-stream"), response.text[:300]
    return [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]


@pytest.fixture()
def console(base_url: str) -> Iterator[tuple[httpx.Client, str]]:
    """A client holding the console's cookies, and the CSRF token its pages carry."""
    with httpx.Client(base_url=base_url, timeout=120, follow_redirects=True) as client:
        page = client.get("/console/projects/mindsdb/knowledge_bases")
        assert page.status_code == 200, page.text
        yield client, csrf_of(page)


def wait_job(client: httpx.Client, kb: str, job_id: str) -> list[dict[str, Any]]:
    """The job's event stream (as the console's page follows it) until the job ends."""
    with client.stream("GET", f"/console/projects/mindsdb/knowledge_bases/{kb}/jobs/{job_id}/events") as r:
        r.read()
    records = events(r)
    assert records and records[-1]["finished"], records
    return records


def latest_job(client: httpx.Client, kb: str) -> str:
    jobs = client.get(f"/api/projects/mindsdb/knowledge_bases/{kb}/jobs").json()
    assert jobs, "no job was queued"
    return str(jobs[0]["id"])


def test_console_home_redirects_and_pages_render(console: tuple[httpx.Client, str]) -> None:
    client, _ = console
    home = client.get("/console", follow_redirects=False)
    assert home.status_code == 303
    assert home.headers["location"] == "/console/projects/mindsdb/knowledge_bases"
    for path in ("/console/projects/mindsdb/agents", "/console/data_sources"):
        page = client.get(path)
        assert page.status_code == 200 and "<h1>" in page.text, path
        assert page.headers["cache-control"] == "no-store"
    # offline: the assets are the package's own, nothing is loaded from another host
    page = client.get("/console/projects/mindsdb/knowledge_bases")
    assert not re.search(r'(src|href)="(https?:)?//', page.text)
    htmx = client.get("/console/static/htmx.min.js")
    assert htmx.status_code == 200 and "htmx 2.0.11" in htmx.text[:200]
    assert client.get("/console/static/htmx.LICENSE.txt").status_code == 200
    # and the console is not part of the API's schema
    assert not [p for p in client.get("/openapi.json").json()["paths"] if p.startswith("/console")]


def test_a_post_without_the_csrf_token_is_refused(console: tuple[httpx.Client, str], unique: str) -> None:
    client, csrf = console
    name = f"csrf_{unique}"
    refused = client.post("/console/projects/mindsdb/knowledge_bases", data={"name": name})
    assert refused.status_code == 403 and "did not come from this console" in refused.text
    wrong = client.post(
        "/console/projects/mindsdb/knowledge_bases", data={"name": name, "csrf_token": "x" * 32}
    )
    assert wrong.status_code == 403
    assert client.get(f"/api/projects/mindsdb/knowledge_bases/{name}").status_code == 404  # nothing made
    # the header form (htmx sends it) is accepted, as the form field is
    made = client.post(
        "/console/projects/mindsdb/knowledge_bases",
        data={"name": name},
        headers={"X-CSRF-Token": csrf},
        follow_redirects=False,
    )
    assert made.status_code == 303, made.text
    assert made.headers["location"] == f"/console/projects/mindsdb/knowledge_bases/{name}"


def test_errors_are_shown_as_html(console: tuple[httpx.Client, str], unique: str) -> None:
    client, csrf = console
    missing = client.get(f"/console/projects/mindsdb/knowledge_bases/nope_{unique}")
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("text/html")
    assert 'role="alert"' in missing.text and f"nope_{unique}" in missing.text
    # an htmx request gets the message alone, aimed at the page's alert area (the form keeps its input)
    bad = client.post(
        "/console/projects/mindsdb/knowledge_bases",
        data={"name": "1 bad name", "csrf_token": csrf},
        headers={"HX-Request": "true"},
    )
    assert bad.status_code == 400 and bad.headers["hx-retarget"] == "#alerts"
    assert bad.text.startswith('<div class="alert" role="alert">')
    filters = client.get(
        "/console/projects/mindsdb/knowledge_bases/x",
        params={"searched": "1", "filters": "this is not a filter"},
    )
    assert filters.status_code in (400, 404)


def test_upload_job_search_browse_and_delete(console: tuple[httpx.Client, str], unique: str) -> None:
    client, csrf = console
    kb = f"console_kb_{unique}"
    made = client.post("/console/projects/mindsdb/knowledge_bases", data={"name": kb, "csrf_token": csrf})
    assert made.status_code == 200 and f"<h1>{kb}</h1>" in made.text  # followed to the KB's page
    text = "Pelicans store fish in their throat pouch.\n\nThe lighthouse keeper logs every passing ship."
    uploaded = client.post(
        f"/console/projects/mindsdb/knowledge_bases/{kb}/upload",
        data={"csrf_token": csrf},
        files={"file": (f"Field Notes {unique}.md", text.encode(), "text/markdown")},
    )
    assert uploaded.status_code == 200, uploaded.text
    job_id = latest_job(client, kb)
    assert f'id="job-{job_id}"' in uploaded.text
    records = wait_job(client, kb, job_id)
    assert records[-1]["state"] == "succeeded", records[-1]
    assert records[-1]["sources"] == [f"field_notes_{unique}"]  # the stored file, named after the upload
    assert records[-1]["counts"]["documents"] >= 1

    listing = client.get("/console/projects/mindsdb/knowledge_bases")
    row = re.search(
        rf">{kb}</a></th>\s*<td class=\"num\">(\d+)</td>\s*<td class=\"num\">(\d+)</td>", listing.text
    )
    assert row and int(row.group(1)) >= 1 and int(row.group(2)) >= 1, listing.text

    found = client.get(
        f"/console/projects/mindsdb/knowledge_bases/{kb}",
        params={"searched": "1", "q": "where do pelicans keep fish", "limit": "5", "hybrid": "1"},
    )
    assert found.status_code == 200
    results = found.text.split('id="results"', 1)[1]
    assert "relevance" in results and "throat pouch" in results
    first = results.index("throat pouch")
    assert first < results.find("lighthouse") or results.find("lighthouse") == -1
    # a filter that matches nothing leaves no result
    none = client.get(
        f"/console/projects/mindsdb/knowledge_bases/{kb}",
        params={"searched": "1", "q": "pelicans", "filters": "chunk_id = 'no-such-chunk'"},
    )
    assert ">0 results<" in none.text

    browse = client.get(f"/console/projects/mindsdb/knowledge_bases/{kb}/documents")
    ids = re.findall(r'name="ids" value="([^"]+)"', browse.text)
    assert ids and "Pelicans store fish" in browse.text
    deleted = client.post(
        f"/console/projects/mindsdb/knowledge_bases/{kb}/documents/delete",
        data={"csrf_token": csrf, "ids": ids},
    )
    assert deleted.status_code == 200 and "No chunks" in deleted.text
    assert client.get(f"/api/projects/mindsdb/knowledge_bases/{kb}").json()["chunk_count"] == 0

    dropped = client.post(f"/console/projects/mindsdb/knowledge_bases/{kb}/delete", data={"csrf_token": csrf})
    assert dropped.status_code == 200
    assert client.get(f"/api/projects/mindsdb/knowledge_bases/{kb}").status_code == 404


class _Slow(http.server.BaseHTTPRequestHandler):
    """A site of slow pages in a chain (each links to the next)."""

    def do_GET(self) -> None:
        if not self.path.startswith("/page"):
            self.send_error(404)
            return
        time.sleep(8)  # under the crawler's 15 s page timeout
        n = int(self.path.removeprefix("/page") or 0)
        body = (
            f"<html><body><p>Slow page number {n}.</p><a href='/page{n + 1}'>next</a></body></html>".encode()
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def slow_site() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_a_crawl_is_queued_and_followed(
    console: tuple[httpx.Client, str], unique: str, slow_site: str
) -> None:
    client, csrf = console
    kb = f"console_crawl_{unique}"
    client.post("/console/projects/mindsdb/knowledge_bases", data={"name": kb, "csrf_token": csrf})
    refused = client.post(
        f"/console/projects/mindsdb/knowledge_bases/{kb}/crawl",
        data={"csrf_token": csrf, "urls": "ftp://example.invalid/"},
        headers={"HX-Request": "true"},
    )
    assert refused.status_code == 400, refused.text
    queued = client.post(
        f"/console/projects/mindsdb/knowledge_bases/{kb}/crawl",
        data={"csrf_token": csrf, "urls": f"{slow_site}page0", "crawl_depth": "0", "limit": "1"},
    )
    assert queued.status_code == 200, queued.text
    job_id = latest_job(client, kb)
    assert f'id="job-{job_id}"' in queued.text
    final = wait_job(client, kb, job_id)[-1]
    assert final["state"] == "succeeded" and final["counts"]["documents"] == 1, final
    assert final["sources"] == [f"{slow_site}page0"]


def test_agent_create_edit_and_chat_stream(console: tuple[httpx.Client, str], unique: str) -> None:
    client, csrf = console
    kb = f"console_chat_kb_{unique}"
    client.post("/console/projects/mindsdb/knowledge_bases", data={"name": kb, "csrf_token": csrf})
    rows = [{"id": "h1", "content": "The harbour ferry leaves at seven every morning."}]
    assert client.put(f"/api/projects/mindsdb/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows}})
    agent = f"console_agent_{unique}"
    made = client.post(
        "/console/projects/mindsdb/agents",
        data={
            "csrf_token": csrf,
            "name": agent,
            "provider": "extractive",
            "knowledge_bases": [kb],
            "prompt_template": "Answer from the knowledge base.",
        },
    )
    assert made.status_code == 200 and f"<h1>{agent}</h1>" in made.text
    record = client.get(f"/api/projects/mindsdb/agents/{agent}").json()
    assert record["data"]["knowledge_bases"] == [f"mindsdb.{kb}"]
    assert record["prompt_template"] == "Answer from the knowledge base."

    # an edit with an API key: stored, never shown back; an edit with the field empty keeps it
    secret = f"sk-console-{uuid.uuid4().hex}"
    fields = {
        "csrf_token": csrf,
        "provider": "extractive",
        "knowledge_bases": [kb],
        "prompt_template": "Be brief.",
    }
    edited = client.post(f"/console/projects/mindsdb/agents/{agent}", data={**fields, "api_key": secret})
    assert edited.status_code == 200 and secret not in edited.text
    again = client.post(f"/console/projects/mindsdb/agents/{agent}", data=fields)
    assert secret not in again.text and "stored (leave empty to keep it)" in again.text
    assert client.get(f"/api/projects/mindsdb/agents/{agent}").json()["model"]["api_key"] == secret

    with client.stream(
        "POST",
        f"/console/projects/mindsdb/agents/{agent}/chat",
        data={"question": "When does the harbour ferry leave?", "history": "[]"},
        headers={"X-CSRF-Token": csrf},
    ) as streamed:
        streamed.read()
    chunks = events(streamed)
    kinds = [c["kind"] for c in chunks]
    assert kinds[0] == "start" and kinds[-1] == "end", kinds
    assert "action" in kinds and "step" in kinds and "output" in kinds
    step = next(c for c in chunks if c["kind"] == "step" and c["tool"] == "kb_query_tool")
    assert kb in step["tool_input"] and "ferry" in step["observation"]
    output = next(c for c in chunks if c["kind"] == "output")
    assert "seven every morning" in output["answer"]
    assert any(s.get("name") == f"mindsdb.{kb}" for s in output["sources"]), output["sources"]
    assert secret not in streamed.text

    empty = client.post(
        f"/console/projects/mindsdb/agents/{agent}/chat",
        data={"question": " "},
        headers={"X-CSRF-Token": csrf},
    )
    assert empty.status_code == 400 and "Ask a question" in empty.text
    gone = client.post(f"/console/projects/mindsdb/agents/{agent}/delete", data={"csrf_token": csrf})
    assert gone.status_code == 200 and agent not in gone.text.split("<main", 1)[1].split("Create an agent")[0]


def test_data_source_register_test_and_tables(
    console: tuple[httpx.Client, str], unique: str, tmp_path: Path
) -> None:
    client, csrf = console
    db_file = tmp_path / "shop.db"
    with sqlite3.connect(db_file) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER, total REAL)")
        conn.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    name = f"console_ds_{unique}"
    broken = client.post(
        "/console/data_sources",
        data={"csrf_token": csrf, "name": f"bad_{unique}", "engine": "postgres", "host": "127.0.0.1"},
        headers={"HX-Request": "true"},
    )
    assert broken.status_code == 400 and 'role="alert"' in broken.text
    made = client.post(
        "/console/data_sources",
        data={"csrf_token": csrf, "name": name, "engine": "sqlite", "db_file": str(db_file)},
    )
    assert made.status_code == 200 and f"<h1>{name}</h1>" in made.text, made.text
    tested = client.post(f"/console/data_sources/{name}/test", data={"csrf_token": csrf})
    assert 'id="test-result">The connection works<' in tested.text
    tables = client.get(f"/console/data_sources/{name}/tables")
    assert re.findall(r'<li class="mono">(\w+)</li>', tables.text) == ["customers", "orders"]
    db_file.unlink()
    failing = client.post(f"/console/data_sources/{name}/test", data={"csrf_token": csrf})
    assert 'class="alert" role="alert" id="test-result"' in failing.text
    client.post(f"/console/data_sources/{name}/delete", data={"csrf_token": csrf})
    assert client.get(f"/api/databases/{name}").status_code == 404


# --- with authentication on ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secured(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApp]:
    with served_with_login(
        pg_url, tmp_path_factory.mktemp("console-auth"), "console_auth", USER, PASSWORD
    ) as app:
        yield app


def test_login_form_session_cookie_and_logout(secured: ServedApp) -> None:
    with httpx.Client(base_url=secured.url, timeout=60) as client:
        # a page without a session goes to the login form, which shows nothing of the server
        page = client.get("/console/projects/mindsdb/agents", follow_redirects=False)
        assert page.status_code == 303
        assert page.headers["location"] == "/console/login?next=%2Fconsole%2Fprojects%2Fmindsdb%2Fagents"
        form = client.get(page.headers["location"])
        assert (
            form.status_code == 200 and 'name="password"' in form.text and "Knowledge bases" not in form.text
        )
        assert client.get("/console/static/console.css").status_code == 200  # the assets are public
        assert client.get("/api/projects").status_code == 401  # the API is not opened by the console

        csrf = csrf_of(form)
        wrong = client.post("/console/login", data={"csrf_token": csrf, "username": USER, "password": "nope"})
        assert wrong.status_code == 401 and "Invalid username or password" in wrong.text
        assert "agentkb_console" not in client.cookies
        no_csrf = client.post("/console/login", data={"username": USER, "password": PASSWORD})
        assert no_csrf.status_code == 403

        done = client.post(
            "/console/login",
            data={
                "csrf_token": csrf,
                "username": USER,
                "password": PASSWORD,
                "next": "/console/data_sources",
            },
            follow_redirects=False,
        )
        assert done.status_code == 303 and done.headers["location"] == "/console/data_sources"
        cookie = done.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/console" in cookie
        assert "Secure" not in cookie  # plain http here; over https the cookie is Secure
        token = client.cookies["agentkb_console"]
        # the cookie's token is a login session of the API too (the same auth service made it)
        assert (
            httpx.get(f"{secured.url}/api/projects", headers={"Authorization": f"Bearer {token}"}).status_code
            == 200
        )
        assert client.get("/api/projects").status_code == 401  # but the cookie opens only the console

        signed_in = client.get("/console/data_sources")
        assert signed_in.status_code == 200 and f"Signed in as {USER}" in signed_in.text
        outside = client.post(
            "/console/login",
            data={
                "csrf_token": csrf,
                "username": USER,
                "password": PASSWORD,
                "next": "https://elsewhere.example/",
            },
            follow_redirects=False,
        )
        assert outside.headers["location"] == "/console"
        token = client.cookies["agentkb_console"]  # that login's session

        out = client.post("/console/logout", data={"csrf_token": csrf_of(signed_in)}, follow_redirects=False)
        assert out.status_code == 303 and out.headers["location"] == "/console/login"
        assert (
            httpx.get(f"{secured.url}/api/projects", headers={"Authorization": f"Bearer {token}"}).status_code
            == 401
        )
        after = client.get("/console/data_sources", follow_redirects=False)
        assert after.status_code == 303 and after.headers["location"].startswith("/console/login")


def test_an_expired_session_cookie_goes_back_to_the_login_form(secured: ServedApp) -> None:
    with httpx.Client(base_url=secured.url, timeout=60) as client:
        client.cookies.set("agentkb_console", "not-a-session", domain="127.0.0.1", path="/console")
        page = client.get("/console/data_sources", follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"].startswith("/console/login")
        assert "agentkb_console=;" in page.headers["set-cookie"] and "Max-Age=0" in page.headers["set-cookie"]
        client.cookies.set("agentkb_console", "not-a-session", domain="127.0.0.1", path="/console")
        assert client.get("/console/login").status_code == 200  # the form answers with a stale cookie too


def test_the_readme_shows_the_console_screenshots(repo_root: Path) -> None:
    readme = (repo_root / "README.md").read_text()
    assert "http://127.0.0.1:47334/console" in readme
    shown = set(re.findall(r"\]\((docs/console/[\w.-]+\.png)\)", readme))
    kept = {str(p.relative_to(repo_root)) for p in (repo_root / "docs" / "console").glob("*.png")}
    assert shown and shown == kept, (shown, kept)
    browser_tests = (repo_root / "tests" / "test_console_browser.py").read_text()
    for path in kept:  # each is taken by the browser tests (AGENTKB_CONSOLE_SCREENSHOTS)
        assert f'"{Path(path).stem}"' in browser_tests, path


def test_a_queued_job_is_cancelled(secured: ServedApp) -> None:
    """The server runs no worker: an upload's job stays queued until the console cancels it."""
    with httpx.Client(base_url=secured.url, timeout=120, follow_redirects=True) as client:
        csrf = csrf_of(client.get("/console/login"))
        client.post("/console/login", data={"csrf_token": csrf, "username": USER, "password": PASSWORD})
        kb = f"queued_{uuid.uuid4().hex[:6]}"
        made = client.post("/console/projects/mindsdb/knowledge_bases", data={"name": kb, "csrf_token": csrf})
        assert made.status_code == 200 and f"<h1>{kb}</h1>" in made.text, made.text
        uploaded = client.post(
            f"/console/projects/mindsdb/knowledge_bases/{kb}/upload",
            data={"csrf_token": csrf},
            files={"file": ("notes.txt", b"Queued and never run.", "text/plain")},
        )
        job_id = re.findall(r'id="job-(\w+)" data-state="queued"', uploaded.text)
        assert len(job_id) == 1, uploaded.text
        cancel = f"/console/projects/mindsdb/knowledge_bases/{kb}/jobs/{job_id[0]}/cancel"
        assert f'action="{cancel}"' in uploaded.text
        page = client.post(cancel, data={"csrf_token": csrf})
        assert f'id="job-{job_id[0]}" data-state="cancelled"' in page.text
        assert f'action="{cancel}"' not in page.text
        with client.stream(
            "GET", f"/console/projects/mindsdb/knowledge_bases/{kb}/jobs/{job_id[0]}/events"
        ) as r:
            r.read()
        assert [e["state"] for e in events(r)] == ["cancelled"]


def test_console_pages_are_counted_and_unknown_ones_are_404(console: tuple[httpx.Client, str]) -> None:
    """The pages are imported behind the console's door on its first request: their routes still match as the
    app's own (a request is counted under its page's template) and a path none of them takes is a 404."""
    client, _ = console
    assert client.get("/console/projects/mindsdb/agents").status_code == 200
    missing = client.get("/console/no-such-page")
    assert missing.status_code == 404
    assert client.get("/consoles").status_code == 404  # only /console and what is under it is the door's
    metrics = client.get("/metrics").text
    assert re.search(
        r'agentkb_http_requests_total\{[^}]*route="/console/projects/\{project\}/agents"', metrics
    )
