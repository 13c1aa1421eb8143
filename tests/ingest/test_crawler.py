"""The crawler against real loopback sites (tests/ingest/site.py), plus unit tests of its URL helpers.

`python -m tests.ingest.test_crawler [pages]` runs the throughput check (not a pytest test).
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agentkb.errors import BadRequest
from agentkb.ingest.crawl import fetch as crawl_fetch
from agentkb.ingest.crawl.crawler import (
    CrawlError,
    CrawlOptions,
    Page,
    Skipped,
    Validators,
    canonical_url,
    check_target,
    crawl,
    extraction_pool,
)
from agentkb.ingest.crawl.fetch import Fetcher
from agentkb.ingest.crawl.pinning import pinned_client
from tests.ingest.site import ARTICLES, SECTIONS, OtherSite, RobotsStatusSite, TestSite

SMALL = 200_000  # max_page_bytes for the tests: /huge.html is 300 kB


@pytest.fixture(scope="module")
def other() -> Iterator[OtherSite]:
    with OtherSite() as site:
        yield site


@pytest.fixture(scope="module")
def site(other: OtherSite) -> Iterator[TestSite]:
    with TestSite(other.url) as served:
        yield served


@pytest.fixture()
def fresh(site: TestSite, other: OtherSite) -> TestSite:
    site.reset()
    other.reset()
    other.redirect_to = "/"
    return site


def options(site: TestSite, path: str = "/index.html", **kw: Any) -> CrawlOptions:
    kw.setdefault("allow_private", True)
    kw.setdefault("max_page_bytes", SMALL)
    return CrawlOptions(urls=[site.url + path], **kw)


async def run(opts: CrawlOptions, known: Any = None) -> list[Page | Skipped]:
    return [item async for item in crawl(opts, known)]


def pages(items: list[Page | Skipped], base: str = "") -> dict[str, Page]:
    found = [i for i in items if isinstance(i, Page)]
    by_url = {p.url.removeprefix(base): p for p in found}
    assert len(by_url) == len(found), "a page was yielded twice"
    return by_url


def reasons(items: list[Page | Skipped]) -> list[tuple[str, str]]:
    return [(i.url, i.reason) if isinstance(i, Skipped) else (i.url, "page") for i in items]


def skipped(items: list[Page | Skipped], base: str = "") -> dict[str, str]:
    found = [i for i in items if isinstance(i, Skipped)]
    by_url = {s.url.removeprefix(base): s.reason for s in found}
    assert len(by_url) == len(found), "a URL was reported twice"
    return by_url


DEPTH_1_PAGES = {
    "/index.html",
    *(f"/section/{i}.html" for i in range(SECTIONS)),
    "/doc.pdf",
    "/etag.html",
    "/lastmod.html",
    "/notes.txt",
    "/about.html",  # via /moved and /about.html?utm_source=test (rel=canonical)
    "/wrong-canonical/1.html",  # rel=canonical to /index.html, but other content: kept
    "/wrong-canonical/2.html",
}
ARTICLE_PAGES = {f"/article/{i}-{j}.html" for i in range(SECTIONS) for j in range(ARTICLES)}


# -- canonical_url ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "base", "expected"),
    [
        ("HTTP://Example.COM", None, "http://example.com/"),
        ("http://example.com:80/a", None, "http://example.com/a"),
        ("https://example.com:443/a", None, "https://example.com/a"),
        ("https://example.com:8443/a", None, "https://example.com:8443/a"),
        ("http://example.com/a#frag", None, "http://example.com/a"),
        ("http://example.com/a?b=1&c=2#x", None, "http://example.com/a?b=1&c=2"),
        ("http://example.com/a?", None, "http://example.com/a"),
        ("http://example.com/a/./b/../c", None, "http://example.com/a/c"),
        ("http://example.com/..", None, "http://example.com/"),
        ("http://example.com/a/b/..", None, "http://example.com/a/"),
        ("../x.html", "http://example.com/a/b/c.html", "http://example.com/a/x.html"),
        ("/root", "https://example.com/a/b", "https://example.com/root"),
        ("//other.org/p", "https://example.com/", "https://other.org/p"),
        ("?q=1", "http://example.com/page", "http://example.com/page?q=1"),
        ("#top", "http://example.com/page#x", "http://example.com/page"),
        ("", "http://example.com/page", "http://example.com/page"),
        ("  http://example.com/ \n", None, "http://example.com/"),
        ("http://example.com/a b/é", None, "http://example.com/a%20b/%C3%A9"),
        ("http://example.com/%7euser/%2f", None, "http://example.com/%7Euser/%2F"),
        ("http://bücher.example/", None, "http://xn--bcher-kva.example/"),
        ("http://example.com./", None, "http://example.com/"),
        ("http://[::1]:8080/x", None, "http://[::1]:8080/x"),
        ("http://[0:0::1]/", None, "http://[::1]/"),
        ("mailto:a@example.com", None, None),
        ("javascript:void(0)", "http://example.com/", None),
        ("tel:+1555", None, None),
        ("ftp://example.com/file", None, None),
        ("http://user:pw@example.com/", None, None),
        ("http://example.com:99999/", None, None),
        ("http://exa mple.com/", None, None),
        ("http:///path", None, None),
        ("not a url", None, None),
    ],
)
def test_canonical_url(url: str, base: str | None, expected: str | None) -> None:
    assert canonical_url(url, base) == expected


def test_canonical_url_is_idempotent() -> None:
    for url in ("http://example.com/a b/é?x=ü", "HTTPS://EXAMPLE.com:443/a/../b/./c?q#f"):
        once = canonical_url(url)
        assert once is not None and canonical_url(once) == once


# -- check_target (SSRF guard) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.1.2.3",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "169.254.1.1",
        "0.0.0.0",
        "224.0.0.1",
        "100.64.0.1",
        "240.0.0.1",
        "[::1]",
        "[::]",
        "[fe80::1]",
        "[fd00:ec2::254]",
        "[fc00::1]",
        "[ff02::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:169.254.169.254]",
        "[64:ff9b::7f00:1]",
        "[64:ff9b::a00:1]",
        "[2002:7f00:1::]",
        "[2002:a00:1::]",
        "[::a00:1]",  # IPv4-compatible 10.0.0.1
        "[::ffff:10.0.0.1]",
        "100.127.255.1",
    ],
)
def test_check_target_refuses_non_public_addresses(host: str) -> None:
    with pytest.raises(CrawlError) as caught:
        check_target(f"http://{host}/", allow_private=False)
    assert caught.value.reason == "ssrf"
    assert isinstance(caught.value, BadRequest) and caught.value.status == 400


@pytest.mark.parametrize(
    "host", ["8.8.8.8", "93.184.216.34", "[2606:4700:4700::1111]", "[::ffff:8.8.8.8]", "[64:ff9b::808:808]"]
)
def test_check_target_allows_public_addresses(host: str) -> None:
    check_target(f"https://{host}/x", allow_private=False)


def test_check_target_allow_private_still_refuses_metadata() -> None:
    check_target("http://127.0.0.1:8080/", allow_private=True)
    check_target("http://10.1.2.3/", allow_private=True)
    metadata = ("169.254.169.254", "[fd00:ec2::254]", "[::ffff:169.254.169.254]", "100.100.100.200")
    for host in (*metadata, "[::a9fe:a9fe]", "[64:ff9b::a9fe:a9fe]", "[2002:a9fe:a9fe::]"):
        with pytest.raises(CrawlError, match="metadata"):
            check_target(f"http://{host}/latest/meta-data/", allow_private=True)


@pytest.mark.parametrize(
    ("host", "why"),
    [
        ("0.0.0.0", "an unspecified address"),
        ("[::]", "an unspecified address"),
        ("[::ffff:10.0.0.1]", "a private address"),
        ("[::ffff:127.0.0.1]", "a loopback address"),
        ("100.64.0.1", "a shared (carrier-grade NAT) address"),
        ("[fe80::1]", "a link-local / cloud metadata address"),
    ],
)
def test_check_target_says_why(host: str, why: str) -> None:
    with pytest.raises(CrawlError) as caught:
        check_target(f"http://{host}/", allow_private=False)
    assert str(caught.value.detail).endswith(why), caught.value.detail


def test_check_target_checks_every_resolved_address() -> None:
    answers = {
        "public.test": ["93.184.216.34", "2606:2800:220:1::1"],
        "mixed.test": ["93.184.216.34", "10.0.0.7"],  # one private address is enough to refuse
        "rebind.test": ["::ffff:127.0.0.1"],
    }

    def resolver(host: str, port: int) -> list[Any]:
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [ipaddress.ip_address(a) for a in answers[host]]

    check_target("http://public.test/", allow_private=False, resolve=resolver)
    for host in ("mixed.test", "rebind.test"):
        with pytest.raises(CrawlError, match="resolves to") as caught:
            check_target(f"http://{host}/", allow_private=False, resolve=resolver)
        assert caught.value.reason == "ssrf"
    with pytest.raises(CrawlError) as caught:
        check_target("http://nowhere.test/", allow_private=False, resolve=resolver)
    assert caught.value.reason == "dns"


def test_check_target_resolves_localhost_for_real() -> None:
    with pytest.raises(CrawlError, match="loopback"):
        check_target("http://localhost:1/", allow_private=False)


# -- option validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw",
    [
        {"urls": []},
        {"urls": ["ftp://example.com/"]},
        {"urls": ["not a url"]},
        {"urls": ["http://127.0.0.1/"], "crawl_depth": -1},
        {"urls": ["http://127.0.0.1/"], "limit": 0},
        {"urls": ["http://127.0.0.1/"], "url_patterns": ["("]},
        {"urls": ["http://127.0.0.1/"], "allowed_domains": ["not a domain!"]},
        {"urls": ["http://127.0.0.1/"], "per_host": 0},
    ],
)
async def test_invalid_options_raise_crawl_error(kw: dict[str, Any]) -> None:
    kw.setdefault("allow_private", True)
    with pytest.raises(CrawlError):
        await run(CrawlOptions(**kw))


# -- crawling the test site ---------------------------------------------------------------------------


async def test_depth_0_is_exactly_the_start_page(fresh: TestSite) -> None:
    items = await run(options(fresh, crawl_depth=0))
    assert items == [items[0]] and isinstance(items[0], Page)
    page = items[0]
    assert page.url == fresh.url + "/index.html"
    assert page.depth == 0 and page.status == 200 and page.content_type == "text/html"
    assert page.title == "Test site index" and "index paragraph 0" in page.text
    assert not page.not_modified and len(page.content_hash) == 64
    assert datetime.fromisoformat(page.fetched_at).tzinfo is not None
    assert fresh.paths() == ["/robots.txt", "/index.html"]


async def test_depth_1_is_start_plus_direct_links(fresh: TestSite, other: OtherSite) -> None:
    items = await run(options(fresh, crawl_depth=1))
    found = pages(items, fresh.url)
    assert set(found) == DEPTH_1_PAGES
    assert {p.depth for u, p in found.items() if u != "/index.html"} == {1}
    skips = skipped(items, fresh.url)
    duplicate = {u for u, r in skips.items() if r == "duplicate"}
    assert len(duplicate & {"/print/section/1.html", "/section/1.html"}) == 1
    assert len(duplicate & {"/moved", "/about.html?utm_source=test"}) == 1
    assert len(duplicate) == 2
    assert {u: r for u, r in skips.items() if r != "duplicate"} == {
        "/private/secret.html": "robots",
        "http://other.invalid/page": "off-domain",
        f"{other.url}/": "off-domain",
        "/away": "off-domain",  # redirects off-domain
        "/loop-a": "redirect loop",
        "/missing.html": "http 404",
        "/huge.html": "too large",  # Content-Length
        "/huge-chunked.html": "too large",  # counted while streaming
        "/logo.png": "type",  # by extension, never requested
        "/image": "type",  # image/png
    }
    requested = fresh.paths()
    assert "/private/secret.html" not in requested and "/logo.png" not in requested
    assert requested.count("/section/0.html") == 1  # LOCALHOST host and #fragment variants de-duplicated
    assert requested.count("/section/2.html") == 1  # /section/./2.html
    assert requested.count("/index.html") == 1 and requested.count("/robots.txt") == 1
    assert "/loop-b" in requested and "/landing" not in requested
    assert other.paths() == []  # off-domain host never contacted
    assert not any(p.startswith("/article/") for p in requested)
    assert found["/about.html"].title == "About"  # /moved → /about.html
    assert found["/notes.txt"].text == "Plain text notes.\nSecond line of the notes."
    assert found["/notes.txt"].content_type == "text/plain" and found["/notes.txt"].title is None
    assert found["/etag.html"].etag == '"v1"'
    assert found["/lastmod.html"].last_modified == "Wed, 01 Jan 2025 00:00:00 GMT"


async def test_same_content_at_two_start_urls_is_one_page(fresh: TestSite) -> None:
    opts = CrawlOptions(urls=[fresh.url + "/", fresh.url + "/index.html"], crawl_depth=0, allow_private=True)
    items = await run(opts)
    assert sorted(r for _, r in reasons(items)) == ["duplicate", "page"]


async def test_charset_from_meta(fresh: TestSite) -> None:
    found = pages(await run(options(fresh, "/latin1.html", crawl_depth=0)), fresh.url)
    assert found["/latin1.html"].title == "Café"
    assert "Un café crème, s'il vous plaît, € 2." in found["/latin1.html"].text


async def test_start_url_redirecting_to_another_host(fresh: TestSite, other: OtherSite) -> None:
    other.redirect_to = fresh.url + "/index.html"
    items = await run(CrawlOptions(urls=[other.url + "/go"], crawl_depth=1, allow_private=True))
    found = pages(items, fresh.url)
    assert found["/index.html"].depth == 0  # a start URL may redirect anywhere (SSRF-checked) ...
    assert {f"/section/{i}.html" for i in range(SECTIONS)} <= set(found)  # ... and its host joins the scope
    assert other.paths()[:2] == ["/robots.txt", "/go"]
    assert found[other.url + "/"].depth == 1  # the start URL's own host stays in scope too


async def test_pdf_text_is_extracted(fresh: TestSite) -> None:
    found = pages(await run(options(fresh, "/doc.pdf", crawl_depth=0)), fresh.url)
    pdf = found["/doc.pdf"]
    assert pdf.content_type == "application/pdf" and pdf.title == "Crawler test PDF"
    assert "Hello from the crawler PDF fixture" in pdf.text


async def test_pdf_without_pypdf_is_skipped(fresh: TestSite, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crawl_fetch, "pdf_supported", lambda: False)
    items = await run(options(fresh, "/doc.pdf", crawl_depth=0))
    assert items == [
        Skipped(fresh.url + "/doc.pdf", "pdf support not installed", "install pypdf to read PDFs")
    ]


async def test_depth_2_exact_set(fresh: TestSite) -> None:
    items = await run(options(fresh, crawl_depth=2))
    found = pages(items, fresh.url)
    assert set(found) == DEPTH_1_PAGES | ARTICLE_PAGES
    assert {found[a].depth for a in ARTICLE_PAGES} == {2}
    assert (
        found["/article/3-4.html"].title == "Article 3-4"
        and "article-3-4 paragraph 7" in found["/article/3-4.html"].text
    )
    requested = fresh.paths()
    assert not any(p.startswith("/deep/") for p in requested)  # links of the last level are not followed
    assert requested.count("/robots.txt") == 1
    page_requests = [p for p in requested if p.startswith(("/article/", "/section/"))]
    assert len(page_requests) == len(set(page_requests))  # nothing fetched twice


async def test_depth_3_reaches_the_deep_pages(fresh: TestSite) -> None:
    found = pages(await run(options(fresh, crawl_depth=3)), fresh.url)
    deep = {f"/deep/{i}-{j}.html" for i in range(SECTIONS) for j in range(ARTICLES)}
    assert set(found) == DEPTH_1_PAGES | ARTICLE_PAGES | deep
    assert len(found) >= 100


async def test_limit_caps_pages_in_bfs_order_without_overfetching(fresh: TestSite) -> None:
    items = await run(options(fresh, crawl_depth=2, limit=7, concurrency=8))
    found = [i for i in items if isinstance(i, Page)]
    assert len(found) == 7
    assert found[0].url == fresh.url + "/index.html"
    assert {p.url.removeprefix(fresh.url) for p in found} <= DEPTH_1_PAGES  # depth 1 has 11 pages
    requested = fresh.paths()
    assert not any(p.startswith("/article/") for p in requested)
    html_requests = [p for p in requested if p.endswith((".html", ".pdf", ".txt")) and "huge" not in p]
    html_requests.remove("/robots.txt")
    assert len(html_requests) <= 7 + 2  # limit, plus the 404 and a possible duplicate


async def test_limit_larger_than_site(fresh: TestSite) -> None:
    found = pages(await run(options(fresh, crawl_depth=2, limit=500)))
    assert len(found) == len(DEPTH_1_PAGES | ARTICLE_PAGES)


async def test_allowed_domains_admit_the_other_host(fresh: TestSite, other: OtherSite) -> None:
    items = await run(options(fresh, crawl_depth=2, allowed_domains=["LOCALHOST", "127.0.0.1"]))
    found = pages(items)
    assert other.url + "/" in found and other.url + "/elsewhere.html" in found
    assert found[other.url + "/"].depth == 1 and found[other.url + "/elsewhere.html"].depth == 2
    assert skipped(items)["http://other.invalid/page"] == "off-domain"
    assert other.paths().count("/robots.txt") == 1  # robots.txt is per origin


async def test_allowed_domains_without_the_start_host(fresh: TestSite, other: OtherSite) -> None:
    items = await run(options(fresh, crawl_depth=1, allowed_domains=["127.0.0.1"]))
    found = pages(items)
    assert set(found) == {fresh.url + "/index.html", other.url + "/"}  # the start page is always fetched
    assert skipped(items, fresh.url)["/section/0.html"] == "off-domain"


async def test_url_patterns_filter_links_but_not_start_urls(fresh: TestSite) -> None:
    patterns = [r"http://localhost:\d+/section/", r".*\.txt$"]
    items = await run(options(fresh, crawl_depth=2, url_patterns=patterns))
    found = pages(items, fresh.url)
    assert set(found) == {"/index.html", "/notes.txt", *(f"/section/{i}.html" for i in range(SECTIONS))}
    skips = skipped(items, fresh.url)
    assert skips["/print/section/1.html"] == "pattern" and skips["/article/0-0.html"] == "pattern"
    assert skips["/private/secret.html"] == "pattern"
    assert not any(p.startswith("/article/") for p in fresh.paths())


async def test_sitemap_pages_join_at_depth_1(fresh: TestSite) -> None:
    found = pages(await run(options(fresh, crawl_depth=1, use_sitemap=True)), fresh.url)
    deep = {f"/deep/{i}-{i}.html" for i in range(SECTIONS)}
    assert set(found) == DEPTH_1_PAGES | deep
    assert {found[d].depth for d in deep} == {1}


async def test_robots_can_be_ignored(fresh: TestSite) -> None:
    found = pages(await run(options(fresh, crawl_depth=1, respect_robots=False)), fresh.url)
    assert "/private/secret.html" in found and "/robots.txt" not in fresh.paths()


async def test_too_many_redirects_and_timeout(fresh: TestSite) -> None:
    items = await run(options(fresh, "/chain/0", crawl_depth=0, max_redirects=3))
    assert reasons(items) == [(fresh.url + "/chain/0", "too many redirects")]
    assert fresh.paths().count("/chain/3") == 1 and "/chain/4" not in fresh.paths()
    started = time.monotonic()
    items = await run(options(fresh, "/slow.html", crawl_depth=0, page_timeout_s=0.3))
    assert reasons(items) == [(fresh.url + "/slow.html", "timeout")]
    assert time.monotonic() - started < 1.4


async def test_ssrf_guard_refuses_loopback_start_urls(fresh: TestSite, other: OtherSite) -> None:
    for url in (fresh.url + "/index.html", other.url + "/"):
        with pytest.raises(CrawlError) as caught:
            await run(CrawlOptions(urls=[url], crawl_depth=1))
        assert caught.value.reason == "ssrf" and caught.value.status == 400
    assert fresh.paths() == [] and other.paths() == []


async def test_recrawl_with_known_validators_is_not_modified(fresh: TestSite) -> None:
    first = pages(await run(options(fresh, crawl_depth=1)))
    validators = {u: Validators(p.etag, p.last_modified, p.content_hash) for u, p in first.items()}
    asked: list[str] = []

    async def known(url: str) -> Validators | None:
        asked.append(url)
        return validators.get(url)

    fresh.reset()
    second = pages(await run(options(fresh, crawl_depth=1), known), fresh.url)
    assert set(second) == DEPTH_1_PAGES
    assert all(p.not_modified for p in second.values())
    for url in ("/etag.html", "/lastmod.html"):  # leaves with validators: conditional GET, 304
        assert second[url].status == 304 and second[url].text == "" and second[url].title is None
        assert second[url].content_hash == first[fresh.url + url].content_hash
    assert second["/etag.html"].etag == '"v1"'
    assert fresh.request_headers["/etag.html"][0]["If-None-Match"] == '"v1"'
    assert fresh.request_headers["/lastmod.html"][0]["If-Modified-Since"] == "Wed, 01 Jan 2025 00:00:00 GMT"
    for url in DEPTH_1_PAGES - {"/etag.html", "/lastmod.html"}:  # hash comparison
        assert second[url].status == 200 and second[url].text == first[fresh.url + url].text
    assert "If-None-Match" not in fresh.request_headers["/index.html"][0]  # its links are needed
    assert fresh.url + "/index.html" in asked

    changed = dict(validators)
    changed[fresh.url + "/notes.txt"] = Validators(None, None, "0" * 64)

    async def known_changed(url: str) -> Validators | None:
        return changed.get(url)

    third = pages(await run(options(fresh, crawl_depth=1), known_changed), fresh.url)
    assert not third["/notes.txt"].not_modified and third["/index.html"].not_modified


async def test_per_host_politeness(other: OtherSite) -> None:
    with TestSite(other.url, page_delay_s=0.01) as slow:
        # the crawler hangs up on the two huge pages (on /huge.html's declared length, before its body; on the
        # chunked one mid-body) and goes on; the site's thread may still be writing either then (seen under
        # load, at one per host: each "in flight" beside the next page)
        slow.uncounted = frozenset({"/huge.html", "/huge-chunked.html"})
        for per_host, depth, expected in ((2, 2, DEPTH_1_PAGES | ARTICLE_PAGES), (1, 1, DEPTH_1_PAGES)):
            slow.reset()
            found = pages(await run(options(slow, crawl_depth=depth, concurrency=8, per_host=per_host)))
            assert set(found) == {slow.url + p for p in expected}
            assert slow.max_active == per_host  # never more, and the gate does let that many through
        slow.reset()
        await run(options(slow, crawl_depth=2, concurrency=8, per_host=8))
        assert slow.max_active > 2  # the site does see concurrency when the crawler allows it


async def test_crawl_delay_is_honoured_and_capped(other: OtherSite) -> None:
    with TestSite(other.url, crawl_delay=0.15) as delayed:
        await run(options(delayed, crawl_depth=1, limit=4, per_host=4))
        times = [t for t, path in delayed.requests if path != "/robots.txt"]
        assert len(times) >= 4
        # Started 0.15 s apart by the crawler; arrival times jitter, so check the span and a coarse minimum.
        assert times[-1] - times[0] >= 0.15 * (len(times) - 1) - 0.03
        assert min(b - a for a, b in itertools.pairwise(times)) >= 0.08
    with TestSite(other.url, crawl_delay=30) as slow:
        pins: dict[str, Any] = {}
        async with pinned_client(pins) as client:
            fetcher = Fetcher(options(slow), client, None, {"localhost"}, pins=pins)
            await fetcher.robots_for(slow.url + "/index.html")
            assert fetcher.gate("localhost").delay == 2.0


@pytest.mark.parametrize(
    ("status", "expected"), [(404, "page"), (410, "page"), (503, "robots"), (429, "robots")]
)
async def test_robots_txt_status(status: int, expected: str) -> None:
    with RobotsStatusSite(status) as robots_site:
        items = await run(CrawlOptions(urls=[robots_site.url + "/"], crawl_depth=0, allow_private=True))
    assert reasons(items) == [(robots_site.url + "/", expected)]


async def test_unreachable_host_is_skipped() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/"  # bound, not listening: connection refused
        items = await run(CrawlOptions(urls=[url], crawl_depth=0, allow_private=True))
        assert reasons(items) == [(url, "error")]
        items = await run(CrawlOptions(urls=[url], crawl_depth=0, allow_private=True, respect_robots=False))
        assert reasons(items) == [(url, "error")]


async def test_extraction_in_a_process_pool(fresh: TestSite) -> None:
    pool = extraction_pool(1)
    try:
        items = [item async for item in crawl(options(fresh, crawl_depth=1), executor=pool)]
    finally:
        pool.shutdown()
    found = pages(items, fresh.url)
    assert set(found) == DEPTH_1_PAGES
    assert "Hello from the crawler PDF fixture" in found["/doc.pdf"].text


async def test_stopping_early_cancels_in_flight_work(fresh: TestSite) -> None:
    stream = crawl(options(fresh, crawl_depth=2))
    first = await anext(stream)
    await stream.aclose()
    assert isinstance(first, Page)
    await asyncio.sleep(0.05)
    assert not [t for t in asyncio.all_tasks() if "_process" in repr(t.get_coro())]


# -- throughput (not collected by pytest) -------------------------------------------------------------


def throughput_check(n_pages: int = 1000, *, pool_workers: int = 0, **overrides: Any) -> dict[str, float]:
    """Crawl a generated `n_pages` site served by another process (no embedding); returns pages/s, and the
    crawler process's CPU time per page. `pool_workers` > 0 extracts text in an `extraction_pool`."""
    root = Path(__file__).resolve().parents[2]
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.ingest.site", "--pages", str(n_pages)],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
    )
    pool = extraction_pool(pool_workers) if pool_workers else None
    try:
        assert server.stdout is not None
        base = server.stdout.readline().strip()
        if pool is not None:
            pool.submit(int).result()  # workers started before the clock starts
        kw: dict[str, Any] = {"crawl_depth": 10, "limit": n_pages, "allow_private": True}
        kw.update(overrides)
        opts = CrawlOptions(urls=[base + "/p/0.html"], **kw)

        async def go() -> tuple[int, int, float, float]:
            started, cpu = time.perf_counter(), time.process_time()
            n = s = 0
            async for item in crawl(opts, executor=pool):
                if isinstance(item, Page):
                    n += 1
                else:
                    s += 1
            return n, s, time.perf_counter() - started, time.process_time() - cpu

        n, s, elapsed, cpu = asyncio.run(go())
        return {
            "pages": n,
            "skipped": s,
            "seconds": round(elapsed, 2),
            "pages_per_s": round(n / elapsed, 1),
            "crawler_cpu_ms_per_page": round(cpu / max(n, 1) * 1000, 2),
        }
    finally:
        if pool is not None:
            pool.shutdown()
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()}")
    for label, settings in (
        ("defaults (concurrency 8, per_host 2, thread extraction)", {}),
        ("per_host 8", {"per_host": 8}),
        ("extraction_pool(4)", {"pool_workers": 4}),
        ("extraction_pool(4), per_host 8", {"pool_workers": 4, "per_host": 8}),
    ):
        print(label, throughput_check(count, **settings))
