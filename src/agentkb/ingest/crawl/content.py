"""What a fetched body is: its media type and charset, a sniffed type when the server gives none, gzip'd
sitemaps unpacked within a size limit, and a sitemap's URLs (XML urlset / sitemapindex, or plain text)."""

from __future__ import annotations

import gzip
import zlib


def media_type(value: str | None) -> tuple[str, str | None]:
    if not value:
        return "", None
    mime, _, params = value.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset" and val.strip():
            charset = val.strip().strip("\"'")
    return mime.strip().lower(), charset


def sniff(body: bytes) -> str:
    head = body[:1024].lstrip().lower()
    if head.startswith(b"%pdf-"):
        return "application/pdf"
    if head.startswith(b"<?xml") and (b"<urlset" in head or b"<sitemapindex" in head):
        return "application/xml"
    if head.startswith(b"<") or b"<html" in head:
        return "text/html"
    return "text/plain"


def gunzip(data: bytes, limit: int) -> bytes:
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, limit)
    except (zlib.error, gzip.BadGzipFile):
        return b""


def parse_sitemap(body: bytes) -> tuple[str, list[str]]:
    from lxml import etree  # imported by the first sitemap read (a large import)

    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, recover=True)
    try:
        root = etree.fromstring(body, parser=parser)
    except etree.XMLSyntaxError:
        root = None
    if root is None:  # a plain-text sitemap: one URL a line
        lines = body.decode("utf-8", errors="replace").splitlines()
        return "urls", [line.strip() for line in lines if line.strip().startswith(("http://", "https://"))]
    kind = "index" if etree.QName(root).localname == "sitemapindex" else "urls"
    locs = [(el.text or "").strip() for el in root.iter("{*}loc")]
    return kind, [loc for loc in locs if loc]
