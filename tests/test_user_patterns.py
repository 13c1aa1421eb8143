"""Users' patterns run in linear time (RE2): a catastrophic crawl filter does not stall the server, one RE2
cannot run is refused up front, and LIKE / name globs keep their meaning."""

from __future__ import annotations

import fnmatch
import threading
import time
from collections.abc import Iterator, Mapping

import httpx
import pytest

from agentkb import patterns
from agentkb.errors import BadRequest
from tests.ingest.site import NOT_FOUND, Response, Site, html, links, prose
from tests.openai_stub import OpenAIStub

P = "/api/projects/mindsdb"
LONG_LINK = "/" + "a" * 40 + "!"  # `(a+)+$` backtracks 2**40 times on it in Python's `re`
FILTERS = [r"https?://[^/]+/slow\.html$", r"https?://[^/]+/(a+)+$"]


class EvilSite(Site):
    """/ links a page the filters allow (served slowly: the crawl is still running while /health is asked)
    and a long `aaaa…!` link that the catastrophic filter is tried on."""

    def route(self, path: str, headers: Mapping[str, str]) -> Response:
        if path == "/robots.txt":
            return Response(body=b"User-agent: *\nDisallow:\n", content_type="text/plain")
        if path == "/":
            return html("Start", "<h1>Start</h1>" + prose("start") + links("/slow.html", LONG_LINK))
        if path == "/slow.html":
            page = html("Slow", "<h1>Slow</h1>" + prose("slow"))
            page.delay_s = 1.0
            return page
        return NOT_FOUND


@pytest.fixture()
def site() -> Iterator[EvilSite]:
    with EvilSite() as served:
        yield served


def test_catastrophic_filter_does_not_stall_the_server(
    client: httpx.Client, base_url: str, unique: str, site: EvilSite
) -> None:
    kb = f"redos_{unique}"
    with OpenAIStub() as stub:
        model = stub.embedding_model()
        r = client.post(
            f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb, "embedding_model": model}}
        )
        assert r.status_code == 201, r.text
        answer: dict[str, httpx.Response] = {}

        def insert() -> None:
            body = {"urls": [f"{site.url}/"], "crawl_depth": 1, "filters": FILTERS}
            with httpx.Client(base_url=base_url, timeout=120) as own:
                answer["put"] = own.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": body})

        worker = threading.Thread(target=insert)
        worker.start()
        # the long link has been filtered once the allowed page is asked for; that page answers slowly
        for _ in range(600):
            if "/slow.html" in site.paths() or not worker.is_alive():
                break
            time.sleep(0.05)
        assert "/slow.html" in site.paths(), site.paths()
        health = httpx.get(f"{base_url}/health", timeout=60)
        crawling = worker.is_alive()
        worker.join(timeout=120)
    assert health.status_code == 200 and crawling  # the server answered while the crawl ran
    assert answer["put"].status_code == 200, answer["put"].text
    assert client.get(f"{P}/knowledge_bases/{kb}").json()["document_count"] == 2
    assert LONG_LINK not in site.paths()  # matched no filter: skipped


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (r"https?://[^/]+/(?=docs)", "uses a look-ahead"),
        (r"(?<=/)docs", "uses a look-behind"),
        (r"https?://(\w+)/\1", "uses a backreference"),
        (r"https?://[", "is not a valid regular expression"),
    ],
)
def test_filter_that_re2_cannot_run_is_refused_before_a_job(
    client: httpx.Client, unique: str, site: EvilSite, pattern: str, why: str
) -> None:
    kb = f"lookahead_{unique}"
    assert client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb}}).status_code == 201
    jobs_before = client.get(f"{P}/knowledge_bases/{kb}/jobs").json()
    body = {"urls": [f"{site.url}/"], "filters": [r".*\.html$", pattern]}
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": body})
    assert r.status_code == 400, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    detail = r.json()["detail"]
    assert f"filters[1] {pattern!r} {why}" in detail, detail
    if why.startswith("uses"):
        assert "linear-time engine" in detail
    assert client.get(f"{P}/knowledge_bases/{kb}/jobs").json() == jobs_before  # no job queued
    assert site.paths() == []  # nothing fetched


def test_like_and_globs_keep_their_meaning() -> None:
    assert patterns.like("Hello_World", "hello\\_%") is False  # no escape character in MySQL's sense here
    assert patterns.like("Hello_World", "hello_w%")
    assert patterns.like("a.b*c?", "a.b*c?") and not patterns.like("axb", "a.b")
    assert patterns.like("line\nbreak", "line%break")
    for name, pattern in [
        ("kb_show_1", "kb_show*"),
        ("KB_Show", "kb_show"),
        ("kb1", "kb?"),
        ("kb10", "kb?"),
        ("x[1]", "x[[]1]"),
        ("b", "[!a]"),
        ("a", "[!a]"),
        ("m", "[a-z]"),
        ("[", "["),
    ]:
        assert patterns.glob_match(name, pattern) == fnmatch.fnmatchcase(name.casefold(), pattern.casefold())


def test_long_subjects_stay_linear_and_capped() -> None:
    compiled = patterns.compile_regex(r"(a+)+$")
    assert not patterns.matches(compiled, "a" * 5000 + "!")  # Python's `re` would not return
    assert patterns.matches(compiled, "a" * 5000)
    assert not patterns.matches(compiled, "a" * (patterns.MAX_SUBJECT_CHARS + 1))
    with pytest.raises(BadRequest, match="longer than"):
        patterns.compile_regex("a" * (patterns.MAX_PATTERN_CHARS + 1))
