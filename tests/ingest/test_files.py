"""File parsing: every format from a file generated at test time, then the refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkb.errors import BadRequest
from agentkb.ingest.files.detect import detect_extension
from agentkb.ingest.files.parse import Section, TextDocument, file_documents, parse_file
from agentkb.ingest.files.tables import Tabular
from agentkb.kb.documents import ColumnSpec, row_documents
from tests.ingest.fixtures import BROKEN, DOCX_SECTIONS, MAKERS, PDF_PAGES, PPTX_SLIDES, ROWS, make_all


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("fixtures")
    return {**make_all(directory), **make_all(directory, BROKEN)}


def parse(made: dict[str, Path], name: str) -> Tabular | TextDocument:
    return parse_file(made[name], name, name.rsplit(".", 1)[1])


def document(made: dict[str, Path], name: str) -> TextDocument:
    parsed = parse(made, name)
    assert isinstance(parsed, TextDocument)
    return parsed


@pytest.mark.parametrize("name", ["prices.csv", "prices.xlsx", "prices.json", "prices.jsonl"])
def test_tables(made: dict[str, Path], name: str) -> None:
    parsed = parse(made, name)
    assert isinstance(parsed, Tabular)
    assert parsed.columns == ["id", "name", "price", "note"]
    assert parsed.rows == ROWS  # numbers typed as pandas reads them, blanks as None
    documents = list(row_documents(parsed.rows, ColumnSpec(content_columns=("name",)), source=name))
    assert [(d.doc_id, d.content) for d in documents] == [("1", "apple"), ("2", "banana"), ("3", "cherry")]
    assert documents[0].metadata == {"price": 1.5, "note": "red fruit"}


def test_pdf_pages(made: dict[str, Path]) -> None:
    parsed = document(made, "report.pdf")
    assert parsed.page_count == 2
    assert parsed.sections == [Section(text, {"page": n}) for n, text in enumerate(PDF_PAGES, 1)]


def test_docx_sections_by_heading(made: dict[str, Path]) -> None:
    parsed = document(made, "handbook.docx")
    (intro, usage) = DOCX_SECTIONS.items()
    assert parsed.sections == [
        Section("Front matter before headings."),
        Section(f"{intro[0]}\n{intro[1]}", {"section": intro[0]}),
        Section(f"{usage[0]}\n{usage[1]}\ndose | 50g", {"section": usage[0]}),  # tables as rows of cells
    ]


def test_pptx_slides(made: dict[str, Path]) -> None:
    parsed = document(made, "deck.pptx")
    assert parsed.page_count == 2
    assert parsed.sections == [Section(f"{t}\n{b}", {"slide": n}) for n, (t, b) in enumerate(PPTX_SLIDES, 1)]


def test_html_sections_by_h1_to_h4(made: dict[str, Path]) -> None:
    parsed = document(made, "guide.html")
    assert parsed.sections == [
        Section("Preface text."),  # nav, head, scripts and comments are dropped
        Section("Install v2\nRun the installer.", {"section": "Install v2"}),
        Section("Configure\nSet the port\nSet the host", {"section": "Configure"}),
        Section("Deep note\nOnly for experts.\nMinor\nStays in the same section.", {"section": "Deep note"}),
    ]


def test_markdown_sections_by_heading(made: dict[str, Path]) -> None:
    parsed = document(made, "notes.md")
    assert [s.metadata for s in parsed.sections] == [{}, {"section": "Title"}, {"section": "Part two"}]
    assert "# not a heading, inside a fence" in parsed.sections[1].text
    assert parsed.sections[2].text.endswith("#### Level four stays inside part two")


def test_text_and_file_documents(made: dict[str, Path]) -> None:
    parsed = document(made, "plain.txt")
    assert parsed.sections == [Section("Plain text file.\nSecond line with Unicode: café ☕.")]
    (only,) = file_documents(parsed, "plain")
    assert (only.doc_id, only.original_id, only.source, only.content_column) == (
        "plain",
        "plain",
        "plain",
        "content",
    )
    assert only.metadata == {"source": "plain", "file": "plain", "extension": ".txt"}

    pages = file_documents(document(made, "report.pdf"), "report")
    assert [d.doc_id for d in pages] == ["report#p1", "report#p2"]
    assert pages[1].metadata == {"source": "report", "file": "report", "extension": ".pdf", "page": 2}
    assert [d.doc_id for d in file_documents(document(made, "deck.pptx"), "deck")] == ["deck#p1", "deck#p2"]
    sections = file_documents(document(made, "notes.md"), "notes")
    assert [d.doc_id for d in sections] == ["notes#p1", "notes#p2", "notes#p3"]
    assert sections[1].metadata["section"] == "Title"


def test_content_detection(made: dict[str, Path], tmp_path: Path) -> None:
    expected = {"report.pdf": "pdf", "handbook.docx": "docx", "deck.pptx": "pptx", "prices.xlsx": "xlsx",
                "guide.html": "html", "plain.txt": "txt", "prices.csv": "csv", "prices.json": "json"}  # fmt: skip
    for name, ext in expected.items():
        assert detect_extension(made[name]) == ext, name
    assert detect_extension(made["tool.exe"]) is None
    prose = tmp_path / "prose"
    prose.write_text(
        "Hello, world. This is prose, with commas.\nAnd a second line.\nThird, and, more, commas.\n"
    )
    assert detect_extension(prose) == "txt"


def test_csv_variants(tmp_path: Path) -> None:
    path = tmp_path / "semi.csv"
    path.write_bytes("code;name;name;\n007;Zoë;x;\n010;Ann;y;\n".encode("cp1252"))  # not UTF-8
    parsed = parse_file(path, "semi", "csv")
    assert isinstance(parsed, Tabular)
    assert parsed.columns == ["code", "name", "name.1", "Unnamed: 3"]
    assert parsed.rows[0] == {"code": "007", "name": "Zoë", "name.1": "x", "Unnamed: 3": None}  # zeros kept
    path.write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(BadRequest, match=r"File semi is not a valid \.csv file: line 3: expected 2 fields"):
        parse_file(path, "semi", "csv")


@pytest.mark.parametrize(
    ("content", "ext", "message"),
    [
        (b"", "txt", "the file is empty"),
        (b"[1, 2]", "json", "item 0 is not an object"),
        (b"[]", "json", "has no rows"),
        (b'{"a": 1}\n{oops}\n', "jsonl", "line 2"),
        (b"text\x00with NUL", "txt", "binary content"),
        (b"not a zip", "docx", "not a valid .docx file"),
        (b"not a zip", "xlsx", "not a valid .xlsx file"),
        (b"not a zip", "pptx", "not a valid .pptx file"),
    ],
)
def test_invalid_content(tmp_path: Path, content: bytes, ext: str, message: str) -> None:
    path = tmp_path / f"bad.{ext}"
    path.write_bytes(content)
    with pytest.raises(BadRequest, match="File bad") as refused:
        parse_file(path, "bad", ext)
    assert message in refused.value.detail and refused.value.status == 400


def test_corrupt_and_unsupported_files(made: dict[str, Path]) -> None:
    with pytest.raises(BadRequest) as corrupt:
        parse(made, "broken.pdf")
    assert corrupt.value.detail.startswith("File broken.pdf is not a valid .pdf file: ")
    assert corrupt.value.title == "Invalid file"
    with pytest.raises(BadRequest) as unsupported:
        parse(made, "tool.exe")
    assert "File tool.exe: '.exe' files are not supported" in unsupported.value.detail
    assert unsupported.value.title == "Unsupported file type"


def test_every_fixture_parses(made: dict[str, Path]) -> None:
    assert set(MAKERS) <= set(made)
    for name in MAKERS:
        assert parse(made, name)
