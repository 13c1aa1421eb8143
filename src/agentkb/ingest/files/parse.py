"""Uploaded files → a table (`Tabular`) or text sections (`TextDocument`).

Tables: CSV/TSV (delimiter sniffed), XLSX (the first sheet, as MindsDB reads it), JSON (an array of objects, or
one object) and JSON Lines. Their rows go to knowledge bases through `kb.documents.row_documents`, like `rows`.

Documents, one `Section` each: a PDF page (`{"page": n}`), a PPTX slide (`{"slide": n}`), a DOCX part under a
Title/Heading 1-3, an HTML part under h1-h4, a Markdown part under `#`-`###` (`{"section": heading}`), or the
whole of a TXT file. `file_documents` turns them into knowledge-base documents.

Every failure is a 400 naming the file; the libraries' own errors are passed on in the detail. An office file
whose parts inflate past `ParseLimits` (a zip bomb) or a sheet with more cells than they allow is a 413
(`bounds`), refused before the library reads the part.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import re2

from agentkb.errors import AgentKBError, BadRequest
from agentkb.ingest.files.bounds import OFFICE_EXTENSIONS, ParseLimits, check_office_zip
from agentkb.ingest.files.tables import Invalid as _Invalid
from agentkb.ingest.files.tables import Tabular, csv_table, json_lines_table, json_table, xlsx_table
from agentkb.kb.documents import Document


@dataclass(frozen=True, slots=True)
class Section:
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TextDocument:
    sections: list[Section]
    extension: str = "txt"
    page_count: int = 0  # pages (PDF), slides (PPTX), else sections


ParsedFile = Tabular | TextDocument


def parse_file(path: Path, name: str, extension: str, limits: ParseLimits | None = None) -> ParsedFile:
    """Parse by `extension` (with or without the dot). 400 naming `name` if unsupported or unreadable, 413
    past `limits`."""
    limits = limits or ParseLimits()
    ext = extension.lower().lstrip(".")
    parser = _PARSERS.get(ext)
    if parser is None:
        shown = f"'.{ext}'" if ext else "unknown"
        raise BadRequest(
            f"File {name}: {shown} files are not supported (supported: {', '.join(SUPPORTED)})",
            title="Unsupported file type",
        )
    try:
        if path.stat().st_size == 0:
            raise _Invalid("the file is empty")
        if ext in OFFICE_EXTENSIONS:
            check_office_zip(path, name, limits, ext)
        if ext == "xlsx":
            return xlsx_table(path, name, limits.sheet_cells)
        return parser(path)
    except (MemoryError, AgentKBError):
        raise
    except (_Invalid, UnicodeError) as exc:
        raise BadRequest(f"File {name} is not a valid .{ext} file: {exc}", title="Invalid file") from exc
    except Exception as exc:  # each library raises its own types
        detail = str(exc).strip() or type(exc).__name__
        raise BadRequest(
            f"File {name} is not a valid .{ext} file: {type(exc).__name__}: {detail}", title="Invalid file"
        ) from exc


def file_documents(parsed: TextDocument, file_name: str) -> list[Document]:
    """One document per section. The id is the file name for a one-section file, else `{file}#p{n}`, where n is
    the page (PDF), the slide (PPTX) or the section's position (from 1)."""
    single = len(parsed.sections) == 1
    documents = []
    for index, section in enumerate(parsed.sections, 1):
        n = section.metadata.get("page") or section.metadata.get("slide") or index
        doc_id = file_name if single else f"{file_name}#p{n}"
        metadata = {"source": file_name, "file": file_name, "extension": f".{parsed.extension}"}
        documents.append(
            Document(
                doc_id=doc_id,
                original_id=doc_id,
                content_column="content",
                content=section.text,
                metadata={**metadata, **section.metadata},
                row_index=index - 1,
                source=file_name,
            )
        )
    return documents


# --- text ---------------------------------------------------------------------------------------------


def decode_text(data: bytes, *, partial: bool = False) -> str:
    """UTF-8 (BOM or not), UTF-16 with a BOM, else Windows-1252; NUL characters mean binary content."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = data.decode("utf-16", errors="ignore" if partial else "strict")
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            if partial and exc.start >= len(data) - 3:  # a character cut at the end of the sample
                text = data[: exc.start].decode("utf-8-sig")
            else:
                text = data.decode("cp1252", errors="replace")
    if "\x00" in text:
        raise UnicodeError("binary content where text was expected")
    return text


def _read_text(path: Path) -> str:
    return decode_text(path.read_bytes())


def _clean(text: str | None) -> str:
    lines = (" ".join(line.split()) for line in (text or "").replace("\x00", "").splitlines())
    return "\n".join(line for line in lines if line)


def _txt(path: Path) -> TextDocument:
    text = _read_text(path).strip()
    return TextDocument([Section(text)] if text else [], "txt", 1 if text else 0)


def _split_headings(items: list[tuple[str, str | None]], ext: str) -> TextDocument:
    """Sections of `(line, heading or None)` items: a new one at each heading, whose line stays in the text."""
    sections: list[Section] = []
    title: str | None = None
    body: list[str] = []

    def flush() -> None:
        text = "\n".join(body).strip()
        if text:
            sections.append(Section(text, {"section": title} if title else {}))

    for line, heading in items:
        if heading:
            flush()
            title, body = heading, []
        body.append(line)
    flush()
    return TextDocument(sections, ext, len(sections))


# RE2: with Python's `re`, a heading line holding a long run of blanks took time quadratic in its length
_MD_HEADING = re2.compile(r"^ {0,3}#{1,3}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_MD_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def _markdown(path: Path) -> TextDocument:
    items: list[tuple[str, str | None]] = []
    in_fence = False
    for line in _read_text(path).splitlines():
        if _MD_FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _MD_HEADING.match(line)
        items.append((line, match.group(1) if match else None))
    return _split_headings(items, "md")


_HTML_DROP = ("script", "style", "noscript", "template", "head", "nav", "svg", "iframe", "form")
_HTML_BLOCKS = frozenset(
    (
        "address",
        "article",
        "aside",
        "blockquote",
        "br",
        "dd",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "footer",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "td",
        "th",
        "tr",
        "ul",
    )
)
_HTML_HEADINGS = ("h1", "h2", "h3", "h4")
_MARK = "\ue000"  # starts a heading's line in the flattened text (a private-use character, not whitespace)


def _html(path: Path) -> TextDocument:
    import lxml.etree
    import lxml.html

    root = lxml.html.document_fromstring(path.read_bytes())
    lxml.etree.strip_elements(root, lxml.etree.Comment, lxml.etree.ProcessingInstruction, with_tail=False)
    for element in root.xpath("|".join(f"//{tag}" for tag in _HTML_DROP)):
        element.drop_tree()
    parts: list[str] = []
    heading: Any = None  # the heading being walked: its text was taken whole at its start
    for event, element in lxml.etree.iterwalk(root, events=("start", "end")):
        if heading is not None and element is not heading:
            continue
        tag = element.tag if isinstance(element.tag, str) else ""
        parts.append("\n" if tag in _HTML_BLOCKS else "")
        if event == "start" and tag in _HTML_HEADINGS:
            heading = element
            parts.append(f"{_MARK}{' '.join(element.text_content().split())}\n")
        elif event == "start":
            parts.append(element.text or "")
        else:
            heading = None
            parts.append(element.tail or "")
    items = []
    for line in _clean("".join(parts)).splitlines():
        title = line.removeprefix(_MARK).strip()
        if title:
            items.append((title, title if line.startswith(_MARK) else None))
    return _split_headings(items, "html")


# --- office and PDF -----------------------------------------------------------------------------------


def _pdf(path: Path) -> TextDocument:
    import pypdf

    reader = pypdf.PdfReader(path)
    if reader.is_encrypted and not reader.decrypt(""):
        raise _Invalid("the PDF is encrypted")
    pages = reader.pages
    if len(pages) == 0:
        raise _Invalid("the PDF has no pages")
    sections = [
        Section(t, {"page": i}) for i, page in enumerate(pages, 1) if (t := _clean(page.extract_text()))
    ]
    return TextDocument(sections, "pdf", len(pages))


_DOCX_HEADING = re.compile(r"^(Title|Heading [1-3])$")


def _docx(path: Path) -> TextDocument:
    import docx
    from docx.text.paragraph import Paragraph

    document = docx.Document(str(path))
    # style id -> name once: `Paragraph.style` scans every style of the document on each read
    style_names = {s.style_id: s.name or "" for s in document.styles}
    lines: list[str] = []
    headings: set[int] = set()
    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            style = style_names.get(block._p.style or "", "")
            if _DOCX_HEADING.match(style or "") and block.text.strip():
                headings.add(len(lines))
            lines.append(block.text)
        else:
            lines.extend(" | ".join(cell.text.strip() for cell in row.cells) for row in block.rows)
    return _split_headings(
        [(line, line.strip() if i in headings else None) for i, line in enumerate(lines)], "docx"
    )


def _pptx(path: Path) -> TextDocument:
    import pptx

    presentation = pptx.Presentation(str(path))
    sections = []
    for number, slide in enumerate(presentation.slides, 1):
        parts = [text for shape in slide.shapes for text in _shape_texts(shape)]
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            parts.append(slide.notes_slide.notes_text_frame.text)
        text = _clean("\n".join(parts))
        if text:
            sections.append(Section(text, {"slide": number}))
    return TextDocument(sections, "pptx", len(presentation.slides))


def _shape_texts(shape: Any) -> Iterator[str]:
    from pptx.shapes.group import GroupShape

    if isinstance(shape, GroupShape):
        for inner in shape.shapes:
            yield from _shape_texts(inner)
    elif shape.has_text_frame:
        yield shape.text_frame.text
    elif getattr(shape, "has_table", False):
        for row in shape.table.rows:
            yield " | ".join(cell.text for cell in row.cells)


_PARSERS: dict[str, Callable[[Path], ParsedFile]] = {
    "csv": lambda path: csv_table(_read_text(path)), "tsv": lambda path: csv_table(_read_text(path), "\t"),
    "xlsx": lambda path: xlsx_table(path, path.name, ParseLimits().sheet_cells),  # parse_file passes its limits
    "json": lambda path: json_table(_read_text(path)),
    "jsonl": lambda path: json_lines_table(_read_text(path)), "ndjson": lambda path: json_lines_table(_read_text(path)),
    "pdf": _pdf, "docx": _docx, "pptx": _pptx, "html": _html, "htm": _html, "md": _markdown, "markdown": _markdown,
    "txt": _txt,
}  # fmt: skip
SUPPORTED = tuple(_PARSERS)
