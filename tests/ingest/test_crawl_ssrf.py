"""The crawler's SSRF guard end to end: each host resolved once, every answer checked, connections pinned to
the checked addresses (no DNS rebinding), every redirect and robots.txt hop checked, refusals reported.

No test sends anything beyond loopback. Host names come from a test resolver; connections go through
`Network`, an httpcore network backend that records every address the crawler asks it to dial, routes
the one "public" address (`PUBLIC`) to a loopback stand-in site, dials loopback addresses for real (the
private site is on 127.0.0.1) and refuses everything else without touching the network.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpcore
import httpx
import pytest

from agentkb.ingest.crawl import source as crawl_source
from agentkb.ingest.crawl.crawler import CrawlError, CrawlOptions, Page, Skipped, crawl
from agentkb.ingest.crawl.fetch import Fetcher
from agentkb.ingest.crawl.pinning import PinnedTransport
from agentkb.ingest.crawl.source import UrlSource
from agentkb.ingest.request import InsertInput, Progress, SourceRun
from agentkb.kb.documents import ColumnSpec
from tests.ingest.site import PrivateSite, PublicStandIn, Site, html

PUBLIC = "93.184.216.34"  # a global address: the test resolver answers it, `Network` routes it to loopback
PUBLIC_DOWN = "93.184.216.35"  # a global address `Network` treats as refusing connections


class Network(httpcore.AsyncNetworkBackend):
    """Records every (address, port) the crawler dials; see the module docstring."""

    def __init__(self, routes: dict[str, int]) -> None:
        self.routes = routes  # public address → the loopback port standing in for it
        self.dialled: list[tuple[str, int]] = []
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self, host: str, port: int, *args: Any, **kwargs: Any
    ) -> httpcore.AsyncNetworkStream:
        """`args` / `kwargs`: the rest of httpcore's dial (timeout, local address, socket options), passed on."""
        self.dialled.append((host, port))
        if host in self.routes:
            return await self.inner.connect_tcp("127.0.0.1", self.routes[host], *args, **kwargs)
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:  # a name: the crawler must only ever dial addresses
            loopback = False
        if loopback:
            return await self.inner.connect_tcp(host, port, *args, **kwargs)
        raise httpcore.ConnectError(f"test network: {host} is not reachable from the tests")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class Resolver:
    """host → the answer to its 1st, 2nd, … lookup (the last one repeats); records the hosts asked."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    def __call__(self, host: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
        self.calls.append(host)
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        n = sum(1 for h in self.calls if h == host)
        answer = self.answers[host][min(n, len(self.answers[host])) - 1]
        return [ipaddress.ip_address(a) for a in answer]


@pytest.fixture(scope="module")
def private() -> Iterator[PrivateSite]:
    with PrivateSite() as site:
        yield site


# Hosts the public index links to, what they resolve to, and the refusal each must get.
REFUSED = {
    "mapped": (["::ffff:10.0.0.1"], "resolves to ::ffff:a00:1, a private address"),
    "mapped-loopback": (["::ffff:127.0.0.1"], "resolves to ::ffff:7f00:1, a loopback address"),
    "zero": (["0.0.0.0"], "resolves to 0.0.0.0, an unspecified address"),
    "unspecified6": (["::"], "resolves to ::, an unspecified address"),
    "mixed": ([PUBLIC, "10.0.0.7"], "resolves to 10.0.0.7 (one of 2 addresses), a private address"),
    "cgnat": (["100.64.1.2"], "resolves to 100.64.1.2, a shared (carrier-grade NAT) address"),
    "nat64": (["64:ff9b::a00:1"], "resolves to 64:ff9b::a00:1, a private address"),
    "sixtofour": (["2002:a00:1::"], "resolves to 2002:a00:1::, a private address"),
    "linklocal": (["169.254.10.1"], "resolves to 169.254.10.1, a link-local / cloud metadata address"),
    "multicast": (["224.0.0.251"], "resolves to 224.0.0.251, a multicast address"),
}


@pytest.fixture(scope="module")
def public(private: PrivateSite) -> Iterator[PublicStandIn]:
    links = [f"http://{name}.public.test:{private.port}/page" for name in REFUSED]
    with PublicStandIn(private.port, links) as site:
        yield site


@pytest.fixture()
def net(public: PublicStandIn, private: PrivateSite) -> Network:
    public.reset()
    private.reset()
    return Network({PUBLIC: public.port})


def resolver(**extra: list[list[str]]) -> Resolver:
    answers = {f"{name}.public.test": [answer] for name, (answer, _) in REFUSED.items()}
    answers["www.public.test"] = [[PUBLIC]]
    answers["internal.test"] = [["127.0.0.1"]]
    return Resolver(answers | {host.replace("_", "-") + ".test": a for host, a in extra.items()})


async def run(url: str, resolve: Resolver, net: Network, **kw: Any) -> list[Page | Skipped]:
    options = CrawlOptions(urls=[url], **{"crawl_depth": 0, "allow_private": False} | kw)
    return [item async for item in crawl(options, resolver=resolve, network=net)]


def summary(items: list[Page | Skipped]) -> list[tuple[str, str, str]]:
    return [
        (i.url, "page", i.title or "") if isinstance(i, Page) else (i.url, i.reason, i.detail) for i in items
    ]


# -- DNS rebinding ------------------------------------------------------------------------------------


async def test_dns_rebinding_connects_only_to_the_checked_address(
    net: Network, public: PublicStandIn, private: PrivateSite
) -> None:
    # The first lookup says public, every later one says loopback: a crawler that looked the name up
    # again to connect would reach the private site.
    resolve = resolver(rebind=[[PUBLIC], ["127.0.0.1"]])
    url = f"http://rebind.test:{private.port}/page"
    items = await run(url, resolve, net)
    assert summary(items) == [(url, "page", "Public page")]
    assert resolve.calls == ["rebind.test"]  # resolved once, for the check; the connection used its answer
    assert set(net.dialled) == {(PUBLIC, private.port)}
    assert public.paths() == ["/robots.txt", "/page"] and private.paths() == []
    assert public.request_headers["/page"][0]["Host"] == f"rebind.test:{private.port}"


async def test_concurrent_checks_of_a_host_resolve_it_once() -> None:
    resolve = resolver(rebind=[[PUBLIC], ["127.0.0.1"]])
    pins: dict[str, Any] = {}
    client: Any = None  # not used by target_error
    fetcher = Fetcher(
        CrawlOptions(urls=["http://rebind.test/"]), client, None, set(), pins=pins, resolver=resolve
    )
    verdicts = await asyncio.gather(*(fetcher.target_error(f"http://rebind.test/{i}") for i in range(8)))
    assert verdicts == [None] * 8 and resolve.calls == ["rebind.test"]
    assert pins == {"rebind.test": (ipaddress.ip_address(PUBLIC),)}


async def test_the_next_checked_address_is_tried_when_one_fails(net: Network, private: PrivateSite) -> None:
    resolve = resolver(multi=[[PUBLIC_DOWN, PUBLIC]])
    url = f"http://multi.test:{private.port}/page"
    assert summary(await run(url, resolve, net)) == [(url, "page", "Public page")]
    assert net.dialled[:2] == [(PUBLIC_DOWN, private.port), (PUBLIC, private.port)]
    assert private.paths() == []


# -- redirects and robots.txt ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (["127.0.0.1"], "resolves to 127.0.0.1, a loopback address"),
        (["::ffff:127.0.0.1"], "resolves to ::ffff:7f00:1, a loopback address"),
        ([PUBLIC, "127.0.0.1"], "resolves to 127.0.0.1 (one of 2 addresses), a loopback address"),
    ],
)
async def test_a_redirect_to_a_private_host_is_refused_at_that_hop(
    answer: list[str], why: str, net: Network, public: PublicStandIn, private: PrivateSite
) -> None:
    resolve = resolver(internal=[answer])
    url = f"http://www.public.test:{private.port}/to-private"
    items = await run(url, resolve, net)
    target = f"http://internal.test:{private.port}/secret"
    assert summary(items) == [(url, "ssrf", f"Refusing to fetch {target}: internal.test {why}")]
    assert public.paths() == ["/robots.txt", "/to-private"]  # the real redirect, followed by the crawler
    assert private.paths() == [] and {a for a, _ in net.dialled} == {PUBLIC}


async def test_a_robots_txt_redirect_to_a_private_host_is_refused(
    net: Network, public: PublicStandIn, private: PrivateSite
) -> None:
    resolve = resolver(robots_redirect=[[PUBLIC]])
    url = f"http://robots-redirect.test:{private.port}/page"
    items = await run(url, resolve, net)
    assert summary(items) == [(url, "page", "Public page")]  # a refused robots.txt target: no rules
    assert public.paths() == ["/robots.txt", "/page"] and private.paths() == []
    assert {a for a, _ in net.dialled} == {PUBLIC}


@pytest.mark.parametrize(
    ("path", "expected"),
    [("/to-private", [("/secret", "page", "Private")]), ("/page", [("/page", "page", "Public page")])],
)
async def test_with_allow_private_the_same_hops_do_reach_the_private_site(
    path: str, expected: list[tuple[str, str, str]], net: Network, private: PrivateSite
) -> None:
    """The control for the tests above: the set-up does let a leak show."""
    host = "www.public.test" if path == "/to-private" else "robots-redirect.test"
    resolve = resolver(robots_redirect=[[PUBLIC]])
    items = await run(f"http://{host}:{private.port}{path}", resolve, net, allow_private=True)
    base = (
        f"http://internal.test:{private.port}" if path == "/to-private" else f"http://{host}:{private.port}"
    )
    assert [(u.removeprefix(base), r, t) for u, r, t in summary(items)] == expected
    assert private.paths() == (["/robots.txt", "/secret"] if path == "/to-private" else ["/robots.txt"])
    assert ("127.0.0.1", private.port) in net.dialled


# -- refusals in a KB insert: a 400 for a start URL, item errors for links ------------------------------


async def test_refused_links_are_job_errors_with_the_reason(
    net: Network, public: PublicStandIn, private: PrivateSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def load(conn: Any, kb_id: int) -> dict[str, Any]:
        return {}

    async def save(conn: Any, kb_id: int, urls: Iterable[Any]) -> None:
        list(urls)

    async def save_source(conn: Any, kb_id: int, source: Any) -> None:
        pass

    monkeypatch.setattr(crawl_source.crawl_state, "load", load)  # no database: nothing crawled before
    monkeypatch.setattr(crawl_source.crawl_state, "save", save)
    monkeypatch.setattr(crawl_source.crawl_state, "save_source", save_source)
    source = UrlSource(False, resolver=resolver(), network=net)
    start = f"http://www.public.test:{private.port}/"
    given = InsertInput(urls=[start], crawl_depth=1)
    await source.validate(given)
    progress = Progress(job_id="job")
    kb: Any = SimpleNamespace(id=1)
    conn: Any = None  # the crawl state is stubbed above
    batches = [batch async for batch in source.documents(SourceRun(conn, kb, given, ColumnSpec(), progress))]
    assert [d.doc_id for batch in batches for d in batch] == [start]
    expected = {
        f"http://{name}.public.test:{private.port}/page": (
            f"ssrf: Refusing to fetch http://{name}.public.test:{private.port}/page: {name}.public.test {why}"
        )
        for name, (_, why) in REFUSED.items()
    }
    assert {e["item"]: e["error"] for e in progress.errors} == expected
    assert progress.counts["items_failed"] == len(REFUSED)
    assert private.paths() == [] and {a for a, _ in net.dialled} == {PUBLIC}


@pytest.mark.parametrize("name", ["mapped", "zero", "mixed"])
async def test_a_refused_start_url_is_a_400_before_any_job(
    name: str, net: Network, private: PrivateSite
) -> None:
    source = UrlSource(False, resolver=resolver(), network=net)
    url = f"http://{name}.public.test:{private.port}/"
    with pytest.raises(CrawlError) as caught:
        await source.validate(InsertInput(urls=[url]))
    assert caught.value.status == 400 and caught.value.reason == "ssrf"
    assert caught.value.detail == f"Refusing to fetch {url}: {name}.public.test {REFUSED[name][1]}"
    with pytest.raises(CrawlError):  # the crawl itself refuses it too
        await run(url, resolver(), net)
    assert net.dialled == [] and private.paths() == []


# -- the pinned transport -------------------------------------------------------------------------------


async def test_a_host_without_a_pin_is_never_dialled() -> None:
    net = Network({})
    async with httpx.AsyncClient(transport=PinnedTransport({}, net)) as client:
        with pytest.raises(httpx.ConnectError, match="no address checked"):
            await client.get("http://unpinned.test:1/")
    assert net.dialled == []


def _certificates(tmp: Path, name: str) -> tuple[Path, Path, Path]:
    """A test CA and a certificate for `name` (DNS name only, no IP address) signed by it."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.now(UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agentkb test CA")])

    def builder(subject: Any, public_key: Any) -> Any:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(hours=1))
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        )

    ca = (
        builder(ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]), key.public_key())
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, cert_path, key_path = tmp / "ca.pem", tmp / "cert.pem", tmp / "key.pem"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return ca_path, cert_path, key_path


class _TLSSite(Site):
    def route(self, path: str, headers: Any) -> Any:
        return html("Secure", "<p>over TLS</p>")


async def test_tls_goes_by_the_hostname_while_the_connection_goes_to_the_pin(tmp_path: Path) -> None:
    ca, cert, key = _certificates(tmp_path, "secure.test")
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    names: list[str | None] = []
    lock = threading.Lock()

    def sni(sock: Any, name: str | None, context: Any) -> None:
        with lock:
            names.append(name)

    server_context.sni_callback = sni
    site = _TLSSite()
    site.server.socket = server_context.wrap_socket(site.server.socket, server_side=True)
    with site:
        loopback = (ipaddress.ip_address("127.0.0.1"),)
        net = Network({})
        transport = PinnedTransport(
            {"secure.test": loopback, "wrong.test": loopback},
            net,
            ssl_context=ssl.create_default_context(cafile=str(ca)),
        )
        async with httpx.AsyncClient(transport=transport) as client:
            response = await client.get(f"https://secure.test:{site.port}/")
            assert response.status_code == 200 and "over TLS" in response.text
            # The certificate names secure.test only: it was checked against the name, not the address.
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED|match"):
                await client.get(f"https://wrong.test:{site.port}/")
    assert names == ["secure.test", "wrong.test"]  # SNI: the hostname
    assert site.request_headers["/"][0]["Host"] == f"secure.test:{site.port}"
    assert net.dialled == [("127.0.0.1", site.port)] * 2
