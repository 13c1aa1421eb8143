"""Bounded parsing over real HTTP: office files whose parts inflate past the limits (zip bombs, a lying
central directory), sheets declaring or holding too many cells, a parse past its time budget and an
export file that inflates past the import's limit are each refused with a JSON 413 naming the limit, and
nothing is stored; ordinary DOCX, PPTX and XLSX files still parse under the same limits."""

from __future__ import annotations

import gzip
import io
import struct
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import ServedApp
from tests.helpers import export_header
from tests.ingest.fixtures import make_docx, make_pptx, make_xlsx
from tests.openai_stub import OpenAIStub

P = "/api/projects/mindsdb"
MiB = 1 << 20
LIMITS = {
    "max_inflated_member_bytes": MiB,
    "max_inflated_bytes": 2 * MiB,
    "max_sheet_cells": 1000,
    "max_import_inflated_bytes": MiB,
}
PAYLOAD = 16 * MiB  # a part's inflated size in the bombs (a few KiB compressed)


@pytest.fixture(scope="module")
def limited(settings: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """agentkb on the session's database with small parse limits."""
    update = {**LIMITS, "data_dir": tmp_path_factory.mktemp("limited")}
    with ServedApp(settings.model_copy(update=update)) as app:
        yield app.url


@pytest.fixture()
def small(limited: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=limited, timeout=120) as c:
        yield c


def rebuilt(original: bytes, replace: dict[str, bytes]) -> bytes:
    """The zip `original` with the parts in `replace` given new contents (added when new), deflated."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(original)) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf,
    ):
        for info in source.infolist():
            zf.writestr(info.filename, replace.pop(info.filename, None) or source.read(info.filename))
        for name, data in replace.items():
            zf.writestr(name, data)
    return out.getvalue()


def understated(data: bytes, member: str, size: int) -> bytes:
    """`data` (a zip) whose central directory and local header say `member` inflates to `size` bytes."""
    out = bytearray(data)
    at = 0
    while (at := out.find(b"PK\x01\x02", at)) >= 0:
        name_len, local = struct.unpack_from("<H", out, at + 28)[0], struct.unpack_from("<I", out, at + 42)[0]
        if out[at + 46 : at + 46 + name_len].decode() == member:
            struct.pack_into("<I", out, at + 24, size)  # central directory: uncompressed size
            struct.pack_into("<I", out, local + 22, size)  # local header: uncompressed size
        at += 4
    return bytes(out)


def office(maker: Any, tmp_path: Path, name: str) -> bytes:
    return bytes(maker(tmp_path / name).read_bytes())


def padded(office_file: bytes, part: str, size: int = PAYLOAD) -> dict[str, bytes]:
    """`part` of `office_file` with `size` blanks before its closing tag: still valid XML."""
    with zipfile.ZipFile(io.BytesIO(office_file)) as zf:
        xml = zf.read(part)
    end = xml.rindex(b"</")
    return {part: xml[:end] + b" " * size + xml[end:]}


def put(client: httpx.Client, name: str, data: bytes, filename: str) -> httpx.Response:
    return client.put(f"/api/files/{name}", files={"file": (filename, data)})


def assert_refused(client: httpx.Client, name: str, r: httpx.Response, *phrases: str) -> None:
    assert r.status_code == 413, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    detail = r.json()["detail"]
    for phrase in phrases:
        assert phrase in detail, detail
    assert client.get(f"/api/files/{name}").status_code == 404  # nothing stored
    assert name not in [f["name"] for f in client.get("/api/files").json()]


def test_docx_bomb(small: httpx.Client, unique: str, tmp_path: Path) -> None:
    docx = office(make_docx, tmp_path, "ok.docx")
    bomb = rebuilt(docx, padded(docx, "word/document.xml"))
    assert len(bomb) < 100_000
    name = f"bomb_{unique}"
    r = put(small, name, bomb, "report.docx")
    assert_refused(small, name, r, "word/document.xml", "past 1 MiB", "AGENTKB_MAX_INFLATED_MEMBER_BYTES")


def test_docx_whose_central_directory_understates_a_part(
    small: httpx.Client, unique: str, tmp_path: Path
) -> None:
    docx = office(make_docx, tmp_path, "ok.docx")
    liar = understated(rebuilt(docx, padded(docx, "word/document.xml")), "word/document.xml", 900)
    with zipfile.ZipFile(io.BytesIO(liar)) as zf:
        assert zf.getinfo("word/document.xml").file_size == 900  # what the header claims
    name = f"liar_{unique}"
    r = put(small, name, liar, "report.docx")
    assert_refused(small, name, r, "word/document.xml inflates past 1 MiB")


def test_pptx_bomb(small: httpx.Client, unique: str, tmp_path: Path) -> None:
    pptx = office(make_pptx, tmp_path, "ok.pptx")
    bomb = rebuilt(pptx, padded(pptx, "ppt/slides/slide1.xml"))
    name = f"deck_{unique}"
    assert_refused(small, name, put(small, name, bomb, "deck.pptx"), "ppt/slides/slide1.xml", "past 1 MiB")


def test_xlsx_bomb_past_the_total(small: httpx.Client, unique: str, tmp_path: Path) -> None:
    xlsx = office(make_xlsx, tmp_path, "ok.xlsx")
    parts = {f"xl/media/pad{i}.xml": b" " * (MiB - 1000) for i in range(3)}  # each under 1 MiB, 3 MiB in all
    name = f"sheet_{unique}"
    r = put(small, name, rebuilt(xlsx, parts), "book.xlsx")
    assert_refused(small, name, r, "past 2 MiB in all", "AGENTKB_MAX_INFLATED_BYTES")


def test_xlsx_declaring_a_huge_dimension(small: httpx.Client, unique: str, tmp_path: Path) -> None:
    xlsx = office(make_xlsx, tmp_path, "ok.xlsx")
    with zipfile.ZipFile(io.BytesIO(xlsx)) as zf:
        sheet = zf.read("xl/worksheets/sheet1.xml")
    assert b'<dimension ref="A1:' in sheet
    start = sheet.index(b'<dimension ref="')
    end = sheet.index(b"/>", start) + 2
    huge = sheet[:start] + b'<dimension ref="A1:XFD1048576"/>' + sheet[end:]
    name = f"wide_{unique}"
    r = put(small, name, rebuilt(xlsx, {"xl/worksheets/sheet1.xml": huge}), "book.xlsx")
    assert_refused(
        small, name, r, "declares 1048576 rows x 16384 columns", "1000 cells", "AGENTKB_MAX_SHEET_CELLS"
    )


def test_xlsx_holding_too_many_cells(small: httpx.Client, unique: str, tmp_path: Path) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    for r in range(60):
        book.active.append([f"r{r}c{c}" for c in range(20)])  # 1,200 cells
    path = tmp_path / "many.xlsx"
    book.save(str(path))
    with zipfile.ZipFile(path) as zf:
        sheet = zf.read("xl/worksheets/sheet1.xml")
    start = sheet.index(b"<dimension ")
    without = sheet[:start] + sheet[sheet.index(b"/>", start) + 2 :]  # no declared dimension: counted
    name = f"many_{unique}"
    r = put(small, name, rebuilt(path.read_bytes(), {"xl/worksheets/sheet1.xml": without}), "book.xlsx")
    assert_refused(small, name, r, "holds more than 1000 cells")


def test_ordinary_office_files_parse_under_the_limits(
    small: httpx.Client, unique: str, tmp_path: Path
) -> None:
    for maker, file_name, counted in (
        (make_docx, "handbook.docx", "page_count"),
        (make_pptx, "deck.pptx", "page_count"),
        (make_xlsx, "prices.xlsx", "row_count"),
    ):
        name = f"{file_name.split('.')[0]}_{unique}"
        r = put(small, name, office(maker, tmp_path, file_name), file_name)
        assert r.status_code == 200, r.text
        assert small.get(f"/api/files/{name}").json()[counted] > 0


def test_a_stored_bomb_is_refused_when_a_kb_insert_reads_it(
    client: httpx.Client, small: httpx.Client, unique: str, tmp_path: Path
) -> None:
    """Uploaded under the default limits, then named by an insert where the limits are lower: the file's
    read is held to them too, and the insert stores nothing."""
    docx = office(make_docx, tmp_path, "ok.docx")
    bomb = rebuilt(docx, padded(docx, "word/document.xml", 8 * MiB))  # under lxml's 10 MB for one text node
    name = f"stored_{unique}"
    r = put(client, name, bomb, "report.docx")
    assert r.status_code == 200, r.text  # 8 MiB is under the default 256 MiB
    kb = f"bombed_{unique}"
    with OpenAIStub() as stub:
        body = {"name": kb, "embedding_model": stub.embedding_model()}
        assert small.post(f"{P}/knowledge_bases", json={"knowledge_base": body}).status_code == 201
        r = small.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"files": [name]}})
    assert r.status_code == 413, r.text
    assert "word/document.xml" in r.json()["detail"] and "past 1 MiB" in r.json()["detail"]
    assert small.get(f"{P}/knowledge_bases/{kb}").json()["document_count"] == 0


def test_a_parse_past_its_time_budget_is_abandoned(
    settings: Any, tmp_path_factory: pytest.TempPathFactory, unique: str
) -> None:
    update = {"parse_timeout_s": 0.001, "data_dir": tmp_path_factory.mktemp("hurried")}
    rows = b"id,text\n" + b"".join(b"%d,row %d\n" % (i, i) for i in range(50_000))
    with (
        ServedApp(settings.model_copy(update=update)) as app,
        httpx.Client(base_url=app.url, timeout=60) as c,
    ):
        name = f"slow_{unique}"
        r = put(c, name, rows, "rows.csv")
        assert_refused(c, name, r, "parsing took longer than 0.001 s", "AGENTKB_PARSE_TIMEOUT_S")


def test_import_file_bomb(small: httpx.Client, unique: str) -> None:
    name = f"imported_{unique}"
    header = export_header(name, {"provider": "local"})
    chunk = {"type": "chunk", "doc_id": "d", "content": "x" * 1000, "content_hash": "h", "metadata": {}}
    lines = [orjson.dumps(header)]
    lines += [
        orjson.dumps({**chunk, "chunk_id": f"d:{i}", "embedding": "AACAPwAAAEAAAEBA"}) for i in range(16_000)
    ]
    data = gzip.compress(b"\n".join(lines) + b"\n")
    assert len(data) < MiB  # under the limit as uploaded, 16 MiB inflated
    r = small.post(
        f"{P}/knowledge_bases/import", files={"file": ("kb.agentkb.jsonl.gz", data, "application/gzip")}
    )
    assert r.status_code == 413, r.text
    assert "inflates past 1048576 bytes" in r.json()["detail"]
    assert "AGENTKB_MAX_IMPORT_INFLATED_BYTES" in r.json()["detail"]
    assert small.get(f"{P}/knowledge_bases/{name}").status_code == 404  # nothing stored
