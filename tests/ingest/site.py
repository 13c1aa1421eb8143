"""Generated web sites for the crawler tests, served over real HTTP/1.1 on loopback by `http.server` threads.

- `TestSite`: 110+ linked pages plus every awkward case (robots.txt, redirect loop, 404, huge pages, PDF,
  ETag / Last-Modified, off-domain links, duplicate URLs, rel=canonical, a sitemap). Served as
  `http://localhost:<port>`; `OtherSite` is served as `http://127.0.0.1:<port>`, a different host.
- `PrivateSite`, `PublicStandIn`: the SSRF tests' private target and stand-in for a public server.
- `GeneratedSite`: an n-page tree for throughput (`python -m tests.ingest.site --pages 1000` serves one
  in its own process and prints its URL).

Every site records the paths it was asked for and the most requests it ever had in flight at once.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

SECTIONS = 5
ARTICLES = 10
HUGE_BYTES = 300_000
LAST_MODIFIED = "Wed, 01 Jan 2025 00:00:00 GMT"
_VOCABULARY = """crawler knowledge base vector search index page content extraction article section text polite
    robots frontier depth limit domain pattern redirect canonical fragment embedding chunk"""
WORDS = _VOCABULARY.split()


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    chunked: bool = False  # Transfer-Encoding: chunked, no Content-Length
    delay_s: float = 0.0


def html(title: str, body: str, head: str = "") -> Response:
    page = f"<!DOCTYPE html><html><head><title>{title}</title>{head}</head><body>{body}</body></html>"
    return Response(body=page.encode())


def prose(seed: str, sentences: int = 6) -> str:
    """Deterministic filler paragraphs, different for each seed."""
    n = sum(map(ord, seed))
    out = []
    for i in range(sentences):
        words = [WORDS[(n + i * 7 + k * 3) % len(WORDS)] for k in range(14)]
        out.append(f"<p>{seed} paragraph {i}: {' '.join(words).capitalize()}.</p>")
    return "".join(out)


def links(*hrefs: str) -> str:
    return "<ul>" + "".join(f'<li><a href="{h}">{h}</a></li>' for h in hrefs) + "</ul>"


def make_pdf(text: str, title: str = "Crawler test PDF") -> bytes:
    """A minimal valid one-page PDF showing `text` in Helvetica, xref offsets computed here."""

    def escape(s: str) -> str:
        return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    content = f"BT /F1 18 Tf 72 720 Td ({escape(text)}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>"
        ),
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Title ({escape(title)}) >>".encode("latin-1"),
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\n" % (len(objects) + 1)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up (the crawler stops reading huge pages) are expected


class Site:
    """A site in a server thread. Subclasses implement `route`."""

    def __init__(self, host_name: str = "127.0.0.1", port: int = 0) -> None:
        self.host_name = host_name
        self.lock = threading.Lock()
        self.requests: list[tuple[float, str]] = []  # (monotonic time, path) in arrival order
        self.request_headers: dict[str, list[Mapping[str, str]]] = {}
        self.active = 0
        self.max_active = 0
        # paths left out of `active`: a client that hangs up mid-body (the crawler on a page too large while
        # streaming) is done with it, but the thread writing it counts it until a write fails
        self.uncounted: frozenset[str] = frozenset()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no 40 ms delayed-ACK stalls between header and body writes

            def do_GET(self) -> None:
                site._serve(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = _Server(("127.0.0.1", port), Handler)
        self.port = int(self.server.server_address[1])
        self.url = f"http://{host_name}:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def route(self, path: str, headers: Mapping[str, str]) -> Response:
        raise NotImplementedError

    def paths(self) -> list[str]:
        with self.lock:
            return [path for _, path in self.requests]

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.request_headers.clear()
            self.max_active = 0

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path
        counted = path not in self.uncounted
        with self.lock:
            if counted:
                self.active += 1
                self.max_active = max(self.max_active, self.active)
            self.requests.append((time.monotonic(), path))
            self.request_headers.setdefault(path, []).append(dict(handler.headers.items()))

        def finished() -> None:  # before the last bytes go out: the client may ask again as soon as they land
            nonlocal counted
            if counted:
                counted = False
                with self.lock:
                    self.active -= 1

        try:
            response = self.route(path, dict(handler.headers.items()))
            if response.delay_s:
                time.sleep(response.delay_s)
            handler.send_response(response.status)
            handler.send_header("Content-Type", response.content_type)
            for name, value in response.headers.items():
                handler.send_header(name, value)
            if response.chunked:
                handler.send_header("Transfer-Encoding", "chunked")
                handler.end_headers()
                for start in range(0, len(response.body), 16_384):
                    chunk = response.body[start : start + 16_384]
                    handler.wfile.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                handler.wfile.flush()
                finished()
                handler.wfile.write(b"0\r\n\r\n")
            else:
                handler.send_header("Content-Length", str(len(response.body)))
                handler.end_headers()
                finished()
                handler.wfile.write(response.body)
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True
        finally:
            finished()

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


NOT_FOUND = Response(404, b"<html><body>not found</body></html>")


class OtherSite(Site):
    """Another host (127.0.0.1 while the test site is `localhost`). /go redirects to `redirect_to`."""

    redirect_to = "/"

    def route(self, path: str, headers: Mapping[str, str]) -> Response:
        if path == "/go":
            return Response(302, b"", headers={"Location": self.redirect_to})
        if path == "/":
            return html("Other host", "<h1>Other host</h1>" + prose("other") + links("/elsewhere.html"))
        if path == "/elsewhere.html":
            return html("Elsewhere", prose("elsewhere"))
        return NOT_FOUND


class RobotsStatusSite(Site):
    """A one-page site whose robots.txt answers with `status`."""

    def __init__(self, status: int) -> None:
        super().__init__()
        self.status = status

    def route(self, path: str, headers: Mapping[str, str]) -> Response:
        if path == "/robots.txt":
            return Response(self.status, b"", content_type="text/plain")
        return html("Page", prose("robots-status")) if path == "/" else NOT_FOUND


class PrivateSite(Site):
    """A server on a private address (127.0.0.1) that the SSRF tests must never reach with the guard on:
    every path but /robots.txt is a page, so anything the crawler got from it would show."""

    def route(self, path: str, headers: Mapping[str, str]) -> Response:
        return NOT_FOUND if path == "/robots.txt" else html("Private", prose("private " + path))


class PublicStandIn(Site):
    """Stands in for a server on a public address. Test URLs name `<host>.test:<url_port>`, `url_port`
    being the PrivateSite's port (so that a connection leaking to 127.0.0.1 would land there); the SSRF
    tests' network backend routes the public address to this site's own loopback port.

    / links to `links`; /to-private redirects to http://internal.test:<url_port>/secret; /page is a page;
    /robots.txt redirects to internal.test's when the Host is robots-redirect.*, else 404."""

    def __init__(self, url_port: int, links: list[str] | None = None) -> None:
        super().__init__()
        self.url_port = url_port
        self.links = links or []

    def route(self, path: str, headers: Mapping[str, str]) -> Response:
        internal = f"http://internal.test:{self.url_port}"
        if path == "/robots.txt":
            if headers.get("Host", "").startswith("robots-redirect."):
                return Response(302, b"", headers={"Location": internal + "/robots.txt"})
            return NOT_FOUND
        if path == "/":
            return html("Public index", prose("public index") + links(*self.links))
        if path == "/to-private":
            return Response(302, b"", headers={"Location": internal + "/secret"})
        if path == "/page":
            return html("Public page", prose("public page"))
        return NOT_FOUND


class TestSite(Site):
    """The main test site, served as http://localhost:<port>.

    /index.html links to /section/0..4.html and to every special case; each section links its 10
    /article/<s>-<a>.html; each article links back, to its next article, to the next section's first
    article and to /deep/<s>-<a>.html (the only way to the deep pages, so they are at depth 3).
    """

    __test__ = False  # not a pytest class

    def __init__(
        self, other_url: str, *, page_delay_s: float = 0.0, crawl_delay: float | None = None
    ) -> None:
        super().__init__("localhost")
        self.other_url = other_url
        self.page_delay_s = page_delay_s
        self.crawl_delay = crawl_delay
        self.pdf = make_pdf("Hello from the crawler PDF fixture")

    def index_links(self) -> list[str]:
        return [
            *(f"/section/{i}.html" for i in range(SECTIONS)),
            "/index.html#top",
            f"http://LOCALHOST:{self.port}/section/0.html#frag",
            "/section/./2.html",
            "/print/section/1.html",
            "/private/secret.html",
            "http://other.invalid/page",
            f"{self.other_url}/",
            "/loop-a",
            "/missing.html",
            "/huge.html",
            "/huge-chunked.html",
            "/doc.pdf",
            "/etag.html",
            "/lastmod.html",
            "/notes.txt",
            "/moved",
            "/about.html?utm_source=test",
            "/wrong-canonical/1.html",
            "/wrong-canonical/2.html",
            "/logo.png",
            "/image",
            "/away",
            "mailto:someone@example.com",
            "javascript:void(0)",
            "tel:+15550100",
        ]

    def route(self, path: str, headers: Mapping[str, str]) -> Response:
        path = path.split("?", 1)[0]
        if path == "/robots.txt":
            rules = "User-agent: *\nDisallow: /private/\n"
            if self.crawl_delay is not None:
                rules += f"Crawl-delay: {self.crawl_delay}\n"
            rules += f"Sitemap: {self.url}/sitemap.xml\n"
            return Response(body=rules.encode(), content_type="text/plain")
        if path in ("/", "/index.html"):
            body = "<h1 id='top'>Test site</h1>" + prose("index") + links(*self.index_links())
            return html("Test site index", body)
        if path.startswith(("/section/", "/print/section/")):
            number = path.rsplit("/", 1)[-1].removesuffix(".html")
            if not number.isdigit() or int(number) >= SECTIONS:
                return NOT_FOUND
            i = int(number)
            head = f'<link rel="canonical" href="/section/{i}.html">'
            body = f"<h1>Section {i}</h1>" + prose(f"section-{i}")
            body += links("/index.html", *(f"/article/{i}-{j}.html" for j in range(ARTICLES)))
            response = html(f"Section {i}", body, head)
            response.delay_s = self.page_delay_s
            return response
        if path.startswith(("/article/", "/deep/")):
            kind, _, name = path[1:].partition("/")
            i_s, _, j_s = name.removesuffix(".html").partition("-")
            if not (i_s.isdigit() and j_s.isdigit() and int(i_s) < SECTIONS and int(j_s) < ARTICLES):
                return NOT_FOUND
            i, j = int(i_s), int(j_s)
            if kind == "deep":
                return html(f"Deep {i}-{j}", f"<h1>Deep {i}-{j}</h1>" + prose(f"deep-{i}-{j}"))
            body = f"<article><h1>Article {i}-{j}</h1>{prose(f'article-{i}-{j}', 8)}</article>"
            body += links(
                f"/section/{i}.html",
                "/index.html",
                f"/article/{i}-{(j + 1) % ARTICLES}.html",
                f"/article/{(i + 1) % SECTIONS}-0.html",
                f"/deep/{i}-{j}.html",
            )
            response = html(f"Article {i}-{j}", body)
            response.delay_s = self.page_delay_s
            return response
        if path == "/private/secret.html":
            return html("Secret", "<p>robots.txt says no</p>")
        if path in ("/loop-a", "/loop-b"):
            target = "/loop-b" if path == "/loop-a" else "/loop-a"
            return Response(302, b"", headers={"Location": target})
        if path == "/moved":
            return Response(301, b"", headers={"Location": "/about.html"})
        if path == "/away":
            return Response(302, b"", headers={"Location": "http://other.invalid/landing"})
        if path == "/to-loopback":
            return Response(302, b"", headers={"Location": f"http://127.0.0.1:{self.port}/about.html"})
        if path.startswith("/chain/"):
            n = int(path.rsplit("/", 1)[-1])
            return Response(302, b"", headers={"Location": f"/chain/{n + 1}"})
        if path == "/about.html":
            head = '<link rel="canonical" href="/about.html">'
            return html("About", "<h1>About</h1>" + prose("about") + links("/index.html"), head)
        if path.startswith("/wrong-canonical/"):  # a template bug: every page claims to be the home page
            head = '<link rel="canonical" href="/index.html">'
            return html(f"Wrong canonical {path[-6]}", prose(path), head)
        if path in ("/huge.html", "/huge-chunked.html"):
            filler = ("<p>" + "x" * 1000 + "</p>") * (HUGE_BYTES // 1007 + 1)
            response = html("Huge", filler)
            response.chunked = path == "/huge-chunked.html"
            return response
        if path == "/doc.pdf":
            return Response(body=self.pdf, content_type="application/pdf")
        if path == "/etag.html":
            if headers.get("If-None-Match") == '"v1"':
                return Response(304, b"", headers={"ETag": '"v1"'})
            response = html("ETag page", "<h1>ETag page</h1>" + prose("etag") + links("/index.html"))
            response.headers["ETag"] = '"v1"'
            return response
        if path == "/lastmod.html":
            if headers.get("If-Modified-Since") == LAST_MODIFIED:
                return Response(304, b"", headers={"Last-Modified": LAST_MODIFIED})
            response = html("Last-Modified page", "<h1>Dated</h1>" + prose("lastmod"))
            response.headers["Last-Modified"] = LAST_MODIFIED
            return response
        if path == "/latin1.html":  # no charset in Content-Type: the <meta> says windows-1252
            page = '<html><head><meta charset="windows-1252"><title>Café</title></head><body>'
            page += "<p>Un café crème, s'il vous plaît, € 2.</p></body></html>"
            return Response(body=page.encode("cp1252"), content_type="text/html")
        if path == "/notes.txt":
            return Response(body=b"Plain text notes.\nSecond line of the notes.", content_type="text/plain")
        if path in ("/logo.png", "/image"):
            return Response(body=b"\x89PNG\r\n\x1a\n" + b"\0" * 64, content_type="image/png")
        if path == "/slow.html":
            response = html("Slow", prose("slow"))
            response.delay_s = 1.5
            return response
        if path == "/sitemap.xml":
            urls = "".join(f"<url><loc>{self.url}/deep/{i}-{i}.html</loc></url>" for i in range(SECTIONS))
            body = f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
            return Response(body=body.encode(), content_type="application/xml")
        return NOT_FOUND


class GeneratedSite(Site):
    """`pages` pages in a tree: /p/<k>.html links to its 10 children /p/<10k+1..10k+10>.html and back to
    /p/0.html; each page carries about 3 kB of article text inside realistic navigation chrome."""

    def __init__(self, pages: int, host_name: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host_name, port)
        self.pages = pages

    def route(self, path: str, headers: Mapping[str, str]) -> Response:
        name = path.removeprefix("/p/").removesuffix(".html")
        if path == "/robots.txt":
            return Response(body=b"User-agent: *\nDisallow:\n", content_type="text/plain")
        if not path.startswith("/p/") or not name.isdigit() or int(name) >= self.pages:
            return NOT_FOUND
        k = int(name)
        children = [f"/p/{c}.html" for c in range(10 * k + 1, 10 * k + 11) if c < self.pages]
        nav = "<nav>" + links("/p/0.html", "/p/1.html", "/p/2.html") + "</nav>"
        body = f"{nav}<main><article><h1>Page {k}</h1>{prose(f'page-{k}', 20)}</article>{links(*children)}</main>"
        return html(f"Page {k}", body + "<footer>Generated site footer</footer>")


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve a generated site until killed.")
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    site = GeneratedSite(args.pages, port=args.port)
    print(site.url, flush=True)
    site.server.serve_forever()


if __name__ == "__main__":
    main()
