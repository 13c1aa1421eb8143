"""`/api/files` over real HTTP, uploading exactly as the MindsDB SDK does; the upload limit; blob dedup."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkb.errors import PayloadTooLarge
from agentkb.ingest.files.tables import Tabular
from agentkb.service.catalog.files import FileService
from agentkb.storage import files as files_repo
from agentkb.storage.db import Database
from tests.conftest import ServedApp
from tests.helpers import assert_problem
from tests.ingest.fixtures import BROKEN, MAKERS, make_all

TABLES = {"prices.csv", "prices.xlsx", "prices.json", "prices.jsonl"}
PAGES = {"report.pdf": 2, "handbook.docx": 3, "deck.pptx": 2, "guide.html": 4, "notes.md": 3, "plain.txt": 1}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("uploads")
    return {**make_all(directory), **make_all(directory, BROKEN)}


def upload(client: httpx.Client, name: str, content: bytes, original: str | None = None) -> httpx.Response:
    """The SDK's `upload_data`: the name without suffix in the URL and `name`, the full one as file name."""
    original = original or name
    return client.put(
        f"/api/files/{name}",
        data={"original_file_name": original, "name": name, "source_type": "file"},
        files={"file": (original, content)},
    )


def listed(client: httpx.Client) -> dict[str, dict[str, Any]]:
    response = client.get("/api/files/")
    assert response.status_code == 200
    return {record["name"]: record for record in response.json()}


def test_upload_every_format(client: httpx.Client, unique: str, made: dict[str, Path]) -> None:
    names = {}
    for file_name in MAKERS:
        name = f"{file_name.replace('.', '_')}_{unique}"
        response = upload(client, name, made[file_name].read_bytes(), file_name)
        assert response.status_code == 200, response.text
        assert response.json() == ""  # MindsDB's body
        names[file_name] = name

    files = listed(client)
    assert client.get("/api/files").json() == list(files.values())  # both forms, no redirect
    for file_name, name in names.items():
        record = files[name]
        assert set(record) >= {
            "name",
            "row_count",
            "columns",
            "size",
            "page_count",
            "content_type",
            "created_at",
        }
        assert record["size"] == made[file_name].stat().st_size
        assert record["original_name"] == file_name
        assert record["extension"] == file_name.rsplit(".", 1)[1]
        if file_name in TABLES:
            assert (record["row_count"], record["columns"], record["page_count"]) == (
                3,
                ["id", "name", "price", "note"],
                None,
            )
        else:
            assert (record["row_count"], record["columns"]) == (None, None)
            assert record["page_count"] == PAGES[file_name], file_name
    assert files[names["report.pdf"]]["content_type"] == "application/pdf"

    one = client.get(f"/api/files/{names['prices.csv']}")
    assert one.status_code == 200 and one.json() == files[names["prices.csv"]]
    for name in names.values():
        assert client.delete(f"/api/files/{name}").status_code == 200


def test_sdk_dataframe_upload_without_extension(client: httpx.Client, unique: str) -> None:
    """`upload_file(name, df)` sends `df.to_csv()` under the bare name: the format comes from the content."""
    name = f"Frame_{unique}"
    csv = b"id,question,answer\n1,What is agentkb?,A server\n2,Port?,47334\n"
    assert upload(client, name, csv).status_code == 200
    record = client.get(f"/api/files/{name.lower()}").json()  # stored lower-cased, as MindsDB
    assert (record["name"], record["extension"], record["row_count"]) == (name.lower(), "csv", 2)
    assert record["columns"] == ["id", "question", "answer"]
    assert client.get(f"/api/files/{name}").status_code == 200  # names match case-insensitively

    duplicate = upload(client, name.lower(), csv)
    assert assert_problem(duplicate, 400)["title"] == "File already exists"

    assert client.delete(f"/api/files/{name}/").status_code == 200
    second = client.delete(f"/api/files/{name}")
    assert assert_problem(second, 400)["title"] == "Error deleting file"  # MindsDB: 400, not 404
    assert_problem(client.get(f"/api/files/{name}"), 404)


def test_refusals(client: httpx.Client, unique: str, made: dict[str, Path]) -> None:
    dotted = upload(client, f"notes_{unique}.txt", b"hello")
    assert assert_problem(dotted, 400)["detail"] == "File name cannot contain extension."
    assert_problem(upload(client, "not-a-name", b"hello"), 400)

    corrupt = upload(client, f"broken_{unique}", made["broken.pdf"].read_bytes(), "broken.pdf")
    assert (
        f"File broken_{unique} (broken.pdf) is not a valid .pdf file"
        in assert_problem(corrupt, 400)["detail"]
    )
    exe = upload(client, f"tool_{unique}", made["tool.exe"].read_bytes(), "tool.exe")
    assert "'.exe' files are not supported" in assert_problem(exe, 400)["detail"]

    extra = client.put(f"/api/files/x_{unique}", data={"color": "red"}, files={"file": ("a.txt", b"hi")})
    assert assert_problem(extra, 400)["title"] == "Invalid request parameters"
    no_file = client.put(f"/api/files/x_{unique}", data={"source_type": "file"}, files={"other": ("a", b"")})
    assert_problem(no_file, 400)
    only_fields = client.put(f"/api/files/x_{unique}", files={"source_type": (None, "file")})
    assert assert_problem(only_fields, 400)["title"] == "File field is missed"
    url = client.put(
        f"/api/files/x_{unique}", json={"source_type": "url", "source": "http://example.com/a.csv"}
    )
    assert assert_problem(url, 400)["detail"] == "URL file upload is disabled."
    both = client.put(
        f"/api/files/x_{unique}", json={"source_type": "url", "source": "http://x", "file": "a"}
    )
    assert assert_problem(both, 400)["title"] == "Invalid request parameters"
    garbage = client.put(
        f"/api/files/x_{unique}",
        content=b"--nope\r\n",
        headers={"content-type": "multipart/form-data; boundary=b"},
    )
    assert_problem(garbage, 400)
    assert not [n for n in listed(client) if n.endswith(unique)]  # nothing was stored


def _blob_parts(pg_url: str, sha256: str) -> list[bytes]:
    """The parts of blob `sha256` as stored in PostgreSQL (empty when it is not stored)."""
    import psycopg

    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        rows = conn.execute(
            "SELECT p.data FROM file_blobs b JOIN file_blob_parts p USING (sha256) WHERE b.sha256 = %s "
            "ORDER BY p.part",
            (sha256,),
        ).fetchall()
    return [bytes(r[0]) for r in rows]


def test_same_bytes_share_one_blob(client: httpx.Client, unique: str, settings: Any, pg_url: str) -> None:
    content = f"Shared text {unique}\n".encode()
    sha256 = hashlib.sha256(content).hexdigest()
    for name in (f"first_{unique}", f"second_{unique}"):
        assert upload(client, name, content, "shared.txt").status_code == 200
    assert _blob_parts(pg_url, sha256) == [content]  # stored once, in the database
    assert not (settings.data_dir / "files" / sha256[:2]).exists()  # nothing on this host's disk
    assert client.delete(f"/api/files/first_{unique}").status_code == 200
    assert _blob_parts(pg_url, sha256) == [content]  # still used by the second name
    assert client.delete(f"/api/files/second_{unique}").status_code == 200
    assert _blob_parts(pg_url, sha256) == []
    assert not list((settings.data_dir / "files" / "tmp").iterdir())  # no upload left behind


async def test_blob_in_parts_read_by_another_host(
    pg_url: str, served: Any, tmp_path: Path, unique: str
) -> None:
    """A file over one part (1 MiB) is stored in parts and read back whole by a process with another
    directory, as another host would."""
    db = Database(pg_url)
    here = FileService(db, tmp_path / "here")
    there = FileService(db, tmp_path / "there")
    lines = [f"{i},item {i} {unique}" for i in range(120_000)]
    content = ("id,name\n" + "\n".join(lines) + "\n").encode()
    assert len(content) > 2 * 2**20

    async def body() -> AsyncIterator[bytes]:
        for start in range(0, len(content), 65536):
            yield content[start : start + 65536]

    try:
        row = await here.save(f"parts_{unique}", body(), original_name="parts.csv")
        stored = _blob_parts(pg_url, row.sha256)
        assert len(stored) == 3 and b"".join(stored) == content
        parsed = await there.open_parsed(f"parts_{unique}")
        assert isinstance(parsed, Tabular) and len(parsed.rows) == 120_000
        assert parsed.rows[-1]["name"] == f"item 119999 {unique}"
        assert not list(there.tmp_dir.iterdir())  # the copy it parsed is gone
        await here.delete(row.name)
        assert _blob_parts(pg_url, row.sha256) == []
    finally:
        await db.close()


async def test_blobs_left_on_disk_move_into_the_database(
    pg_url: str, served: Any, tmp_path: Path, unique: str
) -> None:
    """Older versions kept blobs on disk (`<files>/<sha[:2]>/<sha>`): a start moves them into PostgreSQL,
    and a read that finds no blob looks there too."""
    db = Database(pg_url)
    service = FileService(db, tmp_path / "files")

    async def one(text: str) -> AsyncIterator[bytes]:
        yield text.encode()

    try:
        rows = [await service.save(f"old{i}_{unique}", one(f"old text {i} {unique}"), original_name="o.txt")
                for i in range(2)]  # fmt: skip
        for row in rows:  # as an older version stored them: on disk only
            legacy = service.legacy_path(row.sha256)
            legacy.parent.mkdir(parents=True, exist_ok=True)
            legacy.write_bytes(b"".join(_blob_parts(pg_url, row.sha256)))
            async with db.transaction() as conn:
                await files_repo.delete_blob(conn, row.sha256)
        assert await service.import_local_blobs() == 2
        for row in rows:
            assert not service.legacy_path(row.sha256).exists()
            assert _blob_parts(pg_url, row.sha256) != []
        # the first read of a blob still on disk imports it
        legacy = service.legacy_path(rows[0].sha256)
        legacy.write_bytes(b"".join(_blob_parts(pg_url, rows[0].sha256)))
        async with db.transaction() as conn:
            await files_repo.delete_blob(conn, rows[0].sha256)
        fresh = FileService(db, tmp_path / "files")  # no parsed copy cached
        parsed = await fresh.open_parsed(rows[0].name)
        assert not isinstance(parsed, Tabular) and f"old text 0 {unique}" in str(parsed)
        assert not legacy.exists() and _blob_parts(pg_url, rows[0].sha256) != []
        for row in rows:
            await service.delete(row.name)
    finally:
        await db.close()


# --- the upload limit ---------------------------------------------------------------------------------

LIMIT = 4096


@pytest.fixture(scope="module")
def small_limit(settings: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A second server whose upload limit is LIMIT bytes (and its own files directory)."""
    data_dir = tmp_path_factory.mktemp("small")
    with ServedApp(settings.model_copy(update={"max_upload_bytes": LIMIT, "data_dir": data_dir})) as app:
        yield app.url, data_dir / "files"


def test_oversize_upload_is_413(small_limit: tuple[str, Path], unique: str) -> None:
    url, root = small_limit
    with httpx.Client(base_url=url, timeout=60) as client:
        assert upload(client, f"fits_{unique}", b"a" * LIMIT, "fits.txt").status_code == 200

        streamed = upload(client, f"big_{unique}", b"a" * (LIMIT + 1), "big.txt")  # counted while streaming
        assert "upload limit of 4096 bytes" in assert_problem(streamed, 413)["detail"]

        def chunks() -> Iterator[bytes]:  # chunked: no Content-Length to judge by
            yield b'--B\r\nContent-Disposition: form-data; name="file"; filename="c.txt"\r\n\r\n'
            for _ in range(8):
                yield b"b" * 1024
            yield b"\r\n--B--\r\n"

        chunked = client.put(
            f"/api/files/chunked_{unique}", content=chunks(),
            headers={"content-type": "multipart/form-data; boundary=B"},
        )  # fmt: skip
        assert_problem(chunked, 413)
        declared = upload(client, f"huge_{unique}", b"c" * (LIMIT + 70_000), "huge.txt")  # refused unread
        assert_problem(declared, 413)
        mine = [r["name"] for r in client.get("/api/files").json() if r["name"].endswith(unique)]
        assert mine == [f"fits_{unique}"]  # the database is shared with the other tests: look at ours only
    assert not list((root / "tmp").iterdir())


async def test_service_limit_and_cleanup(pg_url: str, served: Any, tmp_path: Path, unique: str) -> None:
    db = Database(pg_url)
    service = FileService(db, tmp_path / "files", max_bytes=1000)

    async def body(size: int) -> AsyncIterator[bytes]:
        for _ in range(size // 100):
            yield b"x" * 100

    try:
        with pytest.raises(PayloadTooLarge):
            await service.save(f"limit_{unique}", body(1100), original_name="limit.txt")
        assert not list(service.tmp_dir.iterdir())
        row = await service.save(f"limit_{unique}", body(1000), original_name="limit.txt")
        assert (row.size_bytes, row.page_count, row.extension) == (1000, 1, "txt")
        parsed = await service.open_parsed(f"LIMIT_{unique}")
        assert parsed == await service.open_parsed(f"limit_{unique}")
        await service.delete(row.name)
        assert _blob_parts(pg_url, row.sha256) == []
    finally:
        await db.close()
