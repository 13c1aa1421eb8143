"""Turning a fetched body into text, a title and links: HTML (trafilatura + lxml), plain text, PDF (pypdf).

Every function here is blocking and CPU-bound: the crawler runs them in a thread.
"""

from __future__ import annotations

import codecs
import io
import logging
import re
from dataclasses import dataclass, field
from importlib.util import find_spec
from typing import TYPE_CHECKING

from agentkb.ingest.crawl.urls import canonical_url

if TYPE_CHECKING:  # trafilatura and lxml are imported by the first extraction (large imports)
    import lxml.html

__all__ = ["Extracted", "extract_html", "extract_pdf", "extract_plain", "pdf_supported"]

MAX_PDF_PAGES = 500

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]+)""", re.IGNORECASE)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>", re.IGNORECASE)
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_WHATWG_ALIASES = {"iso-8859-1": "cp1252", "latin-1": "cp1252", "latin1": "cp1252", "ascii": "cp1252"}
_SKIPPED_LINK_SCHEMES = ("mailto:", "javascript:", "tel:", "data:", "ftp:", "file:", "sms:")
_DROP_FOR_FALLBACK = ("script", "style", "noscript", "template", "svg", "head")

logging.getLogger("trafilatura").setLevel(logging.ERROR)
logging.getLogger("pypdf").setLevel(logging.ERROR)


@dataclass(frozen=True)
class Extracted:
    title: str | None
    text: str
    links: list[str] = field(default_factory=list)  # canonical, de-duplicated, in document order
    canonical: str | None = None  # <link rel="canonical">, canonicalised


def pdf_supported() -> bool:
    return find_spec("pypdf") is not None


def _codec(name: str | None) -> str | None:
    if not name:
        return None
    name = name.strip().strip("\"'").lower()
    name = _WHATWG_ALIASES.get(name, name)
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def decode_text(data: bytes, header_charset: str | None, *, sniff_meta: bool = False) -> str:
    """Decode a body: BOM, then the Content-Type charset, then `<meta charset>`, then UTF-8, then cp1252."""
    for bom, bom_codec in _BOMS:
        if data.startswith(bom):
            return data.decode(bom_codec, errors="replace")
    codec = _codec(header_charset)
    if codec is None and sniff_meta:
        match = _META_CHARSET.search(data[:4096])
        codec = _codec(match.group(1).decode("ascii", "replace")) if match else None
    if codec is not None:
        return data.decode(codec, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def _clean(text: str) -> str:
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def extract_html(data: bytes, url: str, header_charset: str | None, max_links: int) -> Extracted:
    """Main text (trafilatura, falling back to the body's text), title, links and rel=canonical of a page."""
    import lxml.html
    import trafilatura
    from lxml import etree

    markup = _XML_DECLARATION.sub("", decode_text(data, header_charset, sniff_meta=True), count=1)
    try:
        tree = lxml.html.document_fromstring(markup)
    except (etree.ParserError, ValueError):
        return Extracted(title=None, text="")
    base = url
    base_href = tree.xpath("string(//base/@href)")
    if isinstance(base_href, str) and base_href.strip():
        base = canonical_url(base_href, url) or url
    links = _links(tree, base, max_links)
    canonical = None
    for element in tree.iter("link"):
        rels = (element.get("rel") or "").lower().split()
        if "canonical" in rels and element.get("href"):
            canonical = canonical_url(element.get("href", ""), base)
            break
    title = _title(tree)
    text = trafilatura.extract(tree, url=url, include_comments=False, include_tables=True, favor_recall=True)
    if not text:
        text = _body_text(tree)
    return Extracted(title=title, text=text.strip(), links=links, canonical=canonical)


def _links(tree: lxml.html.HtmlElement, base: str, max_links: int) -> list[str]:
    found: dict[str, None] = {}
    if max_links <= 0:
        return []
    for element in tree.iter("a", "area"):
        href = (element.get("href") or "").strip()
        if not href or href.startswith("#") or href.lower().startswith(_SKIPPED_LINK_SCHEMES):
            continue
        link = canonical_url(href, base)
        if link is not None and link not in found:
            found[link] = None
            if len(found) >= max_links:
                break
    return list(found)


def _title(tree: lxml.html.HtmlElement) -> str | None:
    candidates = [tree.findtext(".//title")]
    candidates.extend(tree.xpath("//meta[@property='og:title']/@content"))
    heading = tree.find(".//h1")
    if heading is not None:
        candidates.append(heading.text_content())
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            return " ".join(candidate.split())
    return None


def _body_text(tree: lxml.html.HtmlElement) -> str:
    for element in list(tree.iter(*_DROP_FOR_FALLBACK)):
        element.drop_tree()
    body = tree.find(".//body")
    return _clean((body if body is not None else tree).text_content())


def extract_plain(data: bytes, header_charset: str | None) -> Extracted:
    return Extracted(title=None, text=decode_text(data, header_charset).strip())


def extract_pdf(data: bytes) -> Extracted:
    """Text of a PDF's pages (pypdf). Raises ImportError when pypdf is missing, ValueError when unreadable."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            reader.decrypt("")
        texts = [page.extract_text() or "" for page in reader.pages[:MAX_PDF_PAGES]]
        metadata = reader.metadata
        title = metadata.title if metadata is not None else None
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as exc:
        raise ValueError(f"unreadable PDF: {exc}") from exc
    text = "\n\n".join(_clean(t) for t in texts if t.strip())
    return Extracted(title=title.strip() if isinstance(title, str) and title.strip() else None, text=text)
