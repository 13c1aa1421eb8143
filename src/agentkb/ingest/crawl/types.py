"""The crawler's public value types (re-exported by `agentkb.ingest.crawl.crawler`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CrawlOptions", "Page", "Skipped", "Validators"]

DEFAULT_USER_AGENT = "agentkb-crawler/0.1 (+https://github.com/agentkb)"


@dataclass(frozen=True)
class CrawlOptions:
    """What to crawl and how.

    urls: start URLs (depth 0); always fetched, whatever `allowed_domains` and `url_patterns` say.
    crawl_depth: link hops followed from a start URL; 0 = only the start pages.
    limit: most pages yielded as `Page` (skips do not count); None = 1000. Never above 10 000.
    allowed_domains: hosts whose pages are followed, subdomains included; None = the start URLs'
        hosts (a leading `www.` dropped) plus, when a start URL redirects, the host it lands on.
    url_patterns: regexes, RE2 syntax (matched from the start of the canonical URL, as `re.match`, in
        linear time; a URL over 8192 characters matches none); a page other than a start URL is
        fetched only when one matches. None or [] = no filter.
    allow_private: allow loopback/private/link-local targets (never cloud metadata addresses).
    concurrency: requests in flight in all; per_host: requests in flight per host.
    max_page_bytes: a (decompressed) body larger than this is skipped as "too large".
    page_timeout_s: budget for one page: its redirects, headers and body.
    respect_robots: obey robots.txt (fetched once per origin) and its Crawl-delay (capped at 2 s).
    use_sitemap: also take the start origins' sitemaps (robots.txt `Sitemap:` or /sitemap.xml) as
        pages at depth 1.
    """

    urls: list[str]
    crawl_depth: int = 1
    limit: int | None = None
    allowed_domains: list[str] | None = None
    url_patterns: list[str] | None = None
    allow_private: bool = False
    concurrency: int = 8
    per_host: int = 2
    max_page_bytes: int = 5_000_000
    page_timeout_s: float = 15
    max_redirects: int = 5
    user_agent: str = DEFAULT_USER_AGENT
    respect_robots: bool = True
    use_sitemap: bool = False


@dataclass(frozen=True)
class Validators:
    """What an earlier crawl saw of a URL, for a conditional request and a content comparison."""

    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None


@dataclass(frozen=True)
class Page:
    """A fetched page. `url` is canonical (the redirect target, or the page's own rel=canonical when that
    is in scope). `not_modified`: the server answered 304 (then `text` is "" and `title` None) or the
    content hash equals the known one. `content_hash` is sha256 of title + text (the known hash on a 304).
    """

    url: str
    title: str | None
    text: str
    fetched_at: str
    depth: int
    content_type: str
    etag: str | None
    last_modified: str | None
    content_hash: str
    not_modified: bool
    status: int


@dataclass(frozen=True)
class Skipped:
    """A URL the crawler did not turn into a page. `reason` is a short category: robots, off-domain,
    pattern, type, too large, timeout, http <status>, redirect loop, too many redirects, ssrf, dns,
    duplicate, pdf support not installed, frontier full, error. `detail` says more."""

    url: str
    reason: str
    detail: str = ""
