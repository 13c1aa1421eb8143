"""`SELECT kb_recrawl('<kb>')`: a knowledge base filled by crawling a site on 127.0.0.1 is crawled again from
its URL sources, incrementally — a changed page is re-embedded, an unchanged one is not — and pages gone from
the site are removed: one that answers 404, and one the crawl no longer reaches (only when no crawl was cut
short by its `limit` or met a failure). A KB without URL sources, an unknown one and a read-only key are
refused."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import psycopg
import pytest

from agentkb.errors import Forbidden
from agentkb.service.platform import access
from agentkb.service.platform.access import Principal
from tests.conftest import ServedApp
from tests.helpers import sql_error as error
from tests.helpers import sql_rows as rows
from tests.ingest.site import NOT_FOUND, Response, Site, html, links, prose
from tests.openai_stub import OpenAIStub

P = "/api/projects/mindsdb"


class ChangingSite(Site):
    """An index page (`/`) linking the pages in `linked`; each page of `pages` (path → its text's seed) is
    served with an ETag of its body and answers a matching If-None-Match with 304. Paths in `failing`
    answer 500; anything else, 404."""

    def __init__(self, pages: dict[str, str]) -> None:
        super().__init__()
        self.pages = dict(pages)
        self.linked = list(pages)
        self.failing: set[str] = set()
        self.changes = threading.Lock()

    def route(self, path: str, headers: Mapping[str, str]) -> Response:
        with self.changes:
            if path in self.failing:
                return Response(500, b"<html><body>broken</body></html>")
            if path == "/":
                response = html("Index", "<h1>Index</h1>" + prose("index") + links(*self.linked))
            elif path in self.pages:
                seed = self.pages[path]
                response = html(seed.title(), f"<h1>{seed}</h1>" + prose(seed))
            else:
                return NOT_FOUND
        etag = '"' + hashlib.sha256(response.body).hexdigest()[:16] + '"'
        if headers.get("If-None-Match") == etag:
            return Response(304, b"", headers={"ETag": etag})
        response.headers["ETag"] = etag
        return response


@pytest.fixture()
def site() -> Iterator[ChangingSite]:
    pages = {"/keep.html": "steady page", "/change.html": "original page", "/gone.html": "doomed page"}
    with ChangingSite({**pages, "/dropped.html": "orphaned page"}) as served:
        yield served


def crawled_kb(client: httpx.Client, name: str, stub: OpenAIStub, site: ChangingSite, **body: Any) -> None:
    model = stub.embedding_model()
    r = client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": name, "embedding_model": model}})
    assert r.status_code == 201, r.text
    asked = {"urls": [f"{site.url}/"], "crawl_depth": 1, **body}
    r = client.put(f"{P}/knowledge_bases/{name}", json={"knowledge_base": asked})
    assert r.status_code == 200, r.text


def documents(client: httpx.Client, kb: str) -> dict[str, str]:
    """URL → the text stored for it (chunks joined in order)."""
    found: dict[str, list[str]] = {}
    for row in rows(client, f"SELECT id, chunk_id, chunk_content FROM {kb}"):
        found.setdefault(row["id"], []).append(row["chunk_content"])
    return {url: " ".join(texts) for url, texts in found.items()}


def recrawl(client: httpx.Client, name: str) -> dict[str, Any]:
    answer = rows(client, f"SELECT kb_recrawl('{name}')")
    assert len(answer) == 1, answer
    return answer[0]


def embedded_texts(stub: OpenAIStub) -> list[str]:
    return [t for r in stub.requests if r.path.endswith("/embeddings") for t in r.body["input"]]


def test_recrawl_updates_changed_pages_and_removes_gone_ones(
    client: httpx.Client, unique: str, stub: OpenAIStub, site: ChangingSite
) -> None:
    kb = f"recrawl_{unique}"
    crawled_kb(client, kb, stub, site)
    url = site.url
    before = documents(client, kb)
    assert sorted(before) == sorted(
        f"{url}{p}" for p in ("/", "/keep.html", "/change.html", "/gone.html", "/dropped.html")
    )

    with site.changes:
        site.pages["/change.html"] = "zebra crossing page"  # changed
        del site.pages["/gone.html"]  # still linked: answers 404
        site.linked.remove("/dropped.html")  # still served, but no longer linked: the crawl does not reach it
    stub.reset()
    answer = recrawl(client, kb)
    assert answer["DOCUMENTS_DELETED"] == 2 and answer["PAGES_FAILED"] == 0, answer
    assert answer["PAGES_UNCHANGED"] >= 1, answer  # /keep.html (a 304), the index too if its text is the same
    assert answer["ERROR"] is None and answer["SQL"] == f"SELECT kb_recrawl('{kb}')", answer

    after = documents(client, kb)
    assert sorted(after) == [f"{url}/", f"{url}/change.html", f"{url}/keep.html"]
    assert "zebra crossing page" in after[f"{url}/change.html"]
    assert after[f"{url}/keep.html"] == before[f"{url}/keep.html"]
    texts = " ".join(embedded_texts(stub))
    assert (
        "zebra crossing page" in texts and "steady page" not in texts
    )  # the unchanged page: not re-embedded

    job = client.get(f"{P}/knowledge_bases/{kb}/jobs/{answer['JOB_ID']}").json()
    assert job["state"] == "succeeded", job
    assert job["counts"]["documents_deleted"] == 2 and job["counts"]["items_gone"] == 1, job["counts"]
    assert client.get(f"{P}/knowledge_bases/{kb}").json()["document_count"] == 3

    # again, named with its project: nothing changed, nothing deleted; the 404 page was forgotten with its
    # document, so it is now an ordinary failed link
    answer = recrawl(client, f"mindsdb.{kb}")
    assert answer["DOCUMENTS_DELETED"] == 0 and answer["DOCUMENTS_WRITTEN"] == 0, answer
    assert answer["PAGES_UNCHANGED"] == 3 and answer["PAGES_FAILED"] == 1, answer
    job = client.get(f"{P}/knowledge_bases/{kb}/jobs/{answer['JOB_ID']}").json()
    assert job["errors"] == [{"item": f"{url}/gone.html", "error": "http 404: Not Found"}], job
    assert sorted(documents(client, kb)) == sorted(after)


def test_unreached_pages_stay_when_a_crawl_was_cut_short_or_failed(
    client: httpx.Client, unique: str, stub: OpenAIStub, site: ChangingSite
) -> None:
    url = site.url
    with site.changes:  # six linked pages
        site.pages.update({"/extra1.html": "first extra page", "/extra2.html": "second extra page"})
        site.linked += ["/extra1.html", "/extra2.html"]
    # cut short by its limit: the index and 3 of its 6 pages; crawled again, it is cut short again
    capped = f"recrawlcap_{unique}"
    crawled_kb(client, capped, stub, site, limit=4)
    kept = {u.removeprefix(url) for u in documents(client, capped)} - {"/"}
    stored = [p for p in site.linked if p in kept]  # in the index's order, the order they are fetched in
    assert len(stored) == 3, kept
    missing, unlinked = stored[0], stored[-1]  # the first link is fetched before the crawl is cut short
    with site.changes:
        site.linked.remove(unlinked)
        del site.pages[missing]  # a 404 is gone all the same
    answer = recrawl(client, capped)
    assert answer["DOCUMENTS_DELETED"] == 1, answer
    left = documents(client, capped)
    assert f"{url}{unlinked}" in left and f"{url}{missing}" not in left

    # no limit, but a page failed (its links, had it any, were not seen): nothing unreached is deleted
    failed = f"recrawlfail_{unique}"
    crawled_kb(client, failed, stub, site)
    assert len(documents(client, failed)) == 5  # the index and the four pages linked and served
    shown = [p for p in site.linked if p != missing]
    with site.changes:
        site.linked.remove(shown[0])
        site.failing.add(shown[1])
    answer = recrawl(client, failed)
    # failed: the 500, and the 404 link (never stored in this KB, so not a page gone from it)
    assert answer["DOCUMENTS_DELETED"] == 0 and answer["PAGES_FAILED"] == 2, answer
    assert f"{url}{shown[0]}" in documents(client, failed)

    with site.changes:
        site.failing.clear()
    answer = recrawl(client, failed)  # every crawl complete again: the unreached page goes
    assert answer["DOCUMENTS_DELETED"] == 1, answer
    assert f"{url}{shown[0]}" not in documents(client, failed)


def test_recrawl_refusals(client: httpx.Client, unique: str, served: ServedApp) -> None:
    kb = f"norecrawl_{unique}"
    r = client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb}})
    assert r.status_code == 201, r.text
    r = client.put(
        f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": [{"id": 1, "content": "a row"}]}}
    )
    assert r.status_code == 200, r.text
    assert f"Knowledge base mindsdb.{kb} has no URL sources to recrawl" in error(
        client, f"SELECT kb_recrawl('{kb}')"
    )
    assert f"Knowledge Base with name nope_{unique} does not exist" in error(
        client, f"SELECT kb_recrawl('nope_{unique}')"
    )
    assert "Give the knowledge base's name" in error(client, "SELECT kb_recrawl(1)")
    assert "Give the knowledge base's name" in error(client, "SELECT kb_recrawl('a.b.c')")
    assert (
        client.get(f"{P}/knowledge_bases/{kb}/jobs").json()[0]["counts"]["documents"] == 1
    )  # no job was added

    from agentkb.cli.keys import with_services

    async def as_read_only(services: Any) -> str:
        with access.entered(Principal("key", "direct", read_only=True)), pytest.raises(Forbidden) as refused:
            await services.sql.execute(f"SELECT kb_recrawl('{kb}')", "mindsdb")
        return str(refused.value.detail)

    settings = served.uvicorn.server.config.app.state.settings
    assert with_services(settings, as_read_only) == "This API key is read-only: kb_recrawl is not allowed"


def test_migration_takes_sources_from_earlier_url_inserts(
    client: httpx.Client, unique: str, stub: OpenAIStub, site: ChangingSite, pg_url: str
) -> None:
    """Knowledge bases crawled before 0020 have no `crawl_sources`: upgrading takes them from their succeeded
    URL inserts (the latest of each set of start URLs), keyed as new inserts key them."""
    from agentkb.storage.crawl_state import source_key
    from agentkb.storage.migrate import upgrade

    kb = f"recrawlmig_{unique}"
    url = site.url
    starts = [f"{url}/", f"{url}/Zeta.html", f"{url}/alpha.html"]  # "Z" sorts before "a" by code point only
    crawled_kb(client, kb, stub, site, crawl_depth=0)
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"urls": starts[::-1], "limit": 7}})
    assert r.status_code == 200, r.text
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"urls": starts, "limit": 9}})
    assert r.status_code == 200, r.text
    query = (
        "SELECT s.key, s.urls, s.crawl_depth, s.page_limit, s.filters FROM crawl_sources AS s "
        "JOIN knowledge_bases AS kb ON kb.id = s.kb_id WHERE kb.name = %s ORDER BY s.key"
    )
    with psycopg.connect(pg_url, autocommit=True) as conn:
        saved = conn.execute(query, (kb,)).fetchall()
        assert sorted((key, len(urls), limit) for key, urls, _, limit, _ in saved) == sorted(
            [(source_key([f"{url}/"]), 1, None), (source_key(starts), 3, 9)]
        )
        (head,) = conn.execute("SELECT version_num FROM alembic_version").fetchone() or ("",)
        conn.execute(
            "DELETE FROM crawl_sources WHERE kb_id = (SELECT id FROM knowledge_bases WHERE name = %s)", (kb,)
        )
        conn.execute("UPDATE alembic_version SET version_num = '0019_sql_jobs'")
    upgrade(pg_url)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (head,)
        assert conn.execute(query, (kb,)).fetchall() == saved
    assert recrawl(client, kb)["PAGES_FAILED"] == 2  # both sources crawled again: /Zeta, /alpha are 404s


def test_a_scheduled_recrawl_follows_the_site(
    client: httpx.Client, unique: str, stub: OpenAIStub, site: ChangingSite
) -> None:
    """`CREATE JOB … (SELECT kb_recrawl('<kb>')) EVERY 1 second`: the KB follows the site without a person —
    a changed page's new text arrives, a removed page's document goes."""
    kb, job = f"sched_recrawl_{unique}", f"recrawl_job_{unique}"
    crawled_kb(client, kb, stub, site)
    url = site.url
    assert f"{url}/gone.html" in documents(client, kb)
    r = client.post(
        "/api/sql/query", json={"query": f"CREATE JOB {job} (SELECT kb_recrawl('{kb}')) EVERY 1 second"}
    )
    assert r.json()["type"] == "ok", r.text
    with site.changes:
        site.pages["/change.html"] = "zebra crossing page"
        del site.pages["/gone.html"]
        site.linked.remove("/gone.html")
    deadline = time.monotonic() + 60
    while True:
        found = documents(client, kb)
        if "zebra" in found.get(f"{url}/change.html", "") and f"{url}/gone.html" not in found:
            break
        assert time.monotonic() < deadline, found.keys()
        time.sleep(0.2)
    runs = client.get(f"{P}/jobs/{job}/history").json()
    assert all(r["state"] in ("succeeded", "running") for r in runs), runs
    assert any(r["ingest_jobs"] for r in runs if r["state"] == "succeeded"), (
        runs
    )  # each run is an ingestion job
    assert client.delete(f"{P}/jobs/{job}").status_code == 204
