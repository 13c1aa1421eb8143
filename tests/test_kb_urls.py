"""KB insert `urls`: a real site on 127.0.0.1 crawled into a knowledge base, then recrawled."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.ingest.site import GeneratedSite
from tests.openai_stub import OpenAIStub

P = "/api/projects/mindsdb"


@pytest.fixture(scope="module")
def site() -> Iterator[GeneratedSite]:
    with GeneratedSite(60) as served:  # /p/0 links /p/1..10; /p/k links /p/10k+1..10k+10
        yield served


def crawl_into(client: httpx.Client, kb: str, **body: object) -> tuple[dict[str, int], dict[str, object]]:
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": body})
    assert r.status_code == 200, r.text
    counts = {k: int(v) for k, v in (p.split("=") for p in r.headers["x-agentkb-ingest"].split(", "))}
    job = client.get(f"{P}/knowledge_bases/{kb}/jobs/{r.headers['x-agentkb-job']}").json()
    return counts, job


def test_crawl_depths_limit_and_recrawl(client: httpx.Client, unique: str, site: GeneratedSite) -> None:
    with OpenAIStub() as stub:
        model = stub.embedding_model()
        for depth, expected in ((0, 1), (1, 11), (2, 60)):
            kb = f"site{depth}_{unique}"
            client.post(
                f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb, "embedding_model": model}}
            )
            counts, job = crawl_into(client, kb, urls=[f"{site.url}/p/0.html"], crawl_depth=depth, limit=500)
            assert counts["documents"] == expected, (depth, counts, job)
            assert client.get(f"{P}/knowledge_bases/{kb}").json()["document_count"] == expected

        hits = client.post(
            f"{P}/knowledge_bases/site2_{unique}/search",
            json={"query": "Page 7", "filters": {"id": f"{site.url}/p/7.html"}},
        ).json()
        meta = hits[0]["metadata"]
        assert meta["_source"] == f"{site.url}/p/7.html" and meta["title"] == "Page 7" and meta["fetched_at"]

        counts, job = crawl_into(
            client, f"site2_{unique}", urls=[f"{site.url}/p/0.html"], crawl_depth=2, limit=500
        )
        assert counts["embedded"] == 0 and counts["written"] == 0, (
            counts
        )  # unchanged site: nothing re-embedded

        kb = f"capped_{unique}"
        client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb, "embedding_model": model}})
        counts, _ = crawl_into(client, kb, urls=[f"{site.url}/p/0.html"], crawl_depth=2, limit=5)
        assert counts["documents"] == 5

        kb = f"filtered_{unique}"
        client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb, "embedding_model": model}})
        counts, _ = crawl_into(
            client,
            kb,
            urls=[f"{site.url}/p/0.html"],
            crawl_depth=1,
            filters={"allowed_domains": ["example.com"]},
        )
        assert counts["documents"] == 1  # the start page only: its links are off the allowed domains
        kb = f"regex_{unique}"
        client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb, "embedding_model": model}})
        counts, _ = crawl_into(
            client, kb, urls=[f"{site.url}/p/0.html"], crawl_depth=1, filters=[r".*/p/[0-3]\.html"]
        )
        assert counts["documents"] == 4  # the SDK's regex form: pages 0-3


def test_bad_url_inserts(client: httpx.Client, unique: str) -> None:
    kb = f"badurls_{unique}"
    client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb}})
    for body in (
        {"urls": []},
        {"urls": ["ftp://x.example/"]},
        {"urls": ["http://x.example/"], "crawl_depth": -1},
        {"urls": ["http://x.example/"], "filters": 5},
    ):
        r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": body})
        assert r.status_code == 400, (body, r.text)
