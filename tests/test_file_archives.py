"""Uploaded archives (`.zip`, `.tar.gz`) as MindsDB unpacks them, refused safely when they are hostile; path
names in a multipart upload; the order of MindsDB's answers to a JSON (URL) upload."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import httpx
import pytest

from agentkb.errors import BadRequest, PayloadTooLarge
from agentkb.ingest.files.archive import archive_kind, unpack_single

CSV = b"id,name\n1,pen\n2,ink\n"


def zipped(*entries: tuple[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return buffer.getvalue()


def tarred(*members: tarfile.TarInfo, data: bytes = CSV) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for member in members:
            if member.isfile():
                member.size = len(data)
                archive.addfile(member, io.BytesIO(data))
            else:
                archive.addfile(member)
    return buffer.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def put(client: httpx.Client, name: str, data: bytes, filename: str) -> httpx.Response:
    return client.put(f"/api/files/{name}", files={"file": (filename, data)})


def test_archive_kind() -> None:
    assert archive_kind("Data.ZIP") == "zip" and archive_kind("a.tar.gz") == "tar.gz"
    assert archive_kind("a.tgz") is None and archive_kind(None) is None


def test_an_archive_is_stored_under_its_one_files_name(client: httpx.Client, unique: str) -> None:
    inner = f"sales_{unique}"
    assert put(client, f"upload_{unique}", zipped((inner, CSV)), "sales.zip").status_code == 200
    record = client.get(f"/api/files/{inner}").json()  # MindsDB: the file inside names the table
    assert record["row_count"] == 2 and record["columns"] == ["id", "name"] and record["extension"] == "csv"
    assert client.get(f"/api/files/upload_{unique}").status_code == 404
    again = put(client, f"other_{unique}", zipped((inner, CSV)), "sales.zip")
    assert again.status_code == 400 and again.json()["title"] == "File already exists"

    tar_inner = f"stock_{unique}"
    assert put(client, f"t_{unique}", tarred(member(tar_inner)), "stock.tar.gz").status_code == 200
    assert client.get(f"/api/files/{tar_inner}").json()["row_count"] == 2
    for name in (inner, tar_inner):
        assert client.delete(f"/api/files/{name}").status_code == 200


@pytest.mark.parametrize(
    ("data", "filename", "title", "detail"),
    [
        (
            zipped(("../../etc/passwd", b"x")),
            "a.zip",
            "Invalid archive",
            "Attempted Path Traversal in Zip File",
        ),
        (zipped(("/abs.csv", CSV)), "a.zip", "Invalid archive", "Attempted Path Traversal in Zip File"),
        (tarred(member("../evil")), "a.tar.gz", "Invalid archive", "Attempted Path Traversal in tar file"),
        (tarred(member("link", tarfile.SYMTYPE, "/etc/passwd")), "a.tar.gz", "Invalid archive", "link"),
        (tarred(member("hard", tarfile.LNKTYPE, "x")), "a.tar.gz", "Invalid archive", "hard"),
        (zipped(("a", CSV), ("b", CSV)), "a.zip", "Wrong content.", "only one data file"),
        (zipped(("dir/a", CSV)), "a.zip", "Wrong content.", "data file in root"),
        (zipped(("data.csv", CSV)), "a.zip", "Error", "File name cannot contain extension."),
        (b"not a zip at all", "a.zip", "Invalid archive", "not a readable zip archive"),
    ],
    # the archives' bytes hold the time they were made: ids without them, the same in every process
    ids=lambda value: "archive" if isinstance(value, bytes) else None,
)
def test_refused_archives(
    client: httpx.Client, unique: str, data: bytes, filename: str, title: str, detail: str
) -> None:
    response = put(client, f"arc_{unique}", data, filename)
    assert response.status_code == 400, response.text
    assert response.json()["title"] == title and detail in response.json()["detail"]
    assert client.get(f"/api/files/arc_{unique}").status_code == 404


def test_unpacking_stops_at_the_limit(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.zip"
    bomb.write_bytes(zipped(("zeros", b"\0" * 200_000)))  # a few hundred bytes packed
    with pytest.raises(PayloadTooLarge):
        unpack_single(bomb, "zip", tmp_path, 100_000)
    assert [p.name for p in tmp_path.iterdir()] == ["bomb.zip"]  # nothing left behind
    unpacked = unpack_single(bomb, "zip", tmp_path, 200_000)
    assert unpacked.name == "zeros" and unpacked.size == 200_000 and unpacked.path.parent == tmp_path
    with pytest.raises(BadRequest, match="Links are not allowed"):
        link = zipfile.ZipInfo("link")
        link.external_attr = 0o120777 << 16
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr(link, "/etc/passwd")
        (tmp_path / "link.zip").write_bytes(buffer.getvalue())
        unpack_single(tmp_path / "link.zip", "zip", tmp_path, 1000)


@pytest.mark.parametrize("filename", ["../../tmp/x.txt", "dir/x.txt", "..", "a\\b.txt", "/etc/x.txt"])
def test_a_multipart_file_name_with_a_path_is_refused(
    client: httpx.Client, unique: str, filename: str
) -> None:
    response = put(client, f"path_{unique}", b"hello", filename)
    assert response.status_code == 400 and response.json()["title"] == "Invalid file path", response.text
    assert response.json()["detail"] == f"Wrong file name: {filename}"


def test_json_upload_answers_in_mindsdbs_order(client: httpx.Client, unique: str) -> None:
    existing = f"exists_{unique}"
    assert put(client, existing, CSV, "a.csv").status_code == 200

    def title(name: str, body: object) -> str:
        response = client.put(f"/api/files/{name}", json=body)
        assert response.status_code == 400, response.text
        return str(response.json()["title"])

    assert title(existing, ["not", "an", "object"]) == "Invalid request parameters"
    assert (
        title(existing, {"source_type": "url", "file": "x"}) == "Invalid request parameters"
    )  # before exists
    assert title(existing, {"source_type": "url", "source": "http://x"}) == "File already exists"
    assert title("with.dot", {"source_type": "ftp"}) == "Wrong file source type"  # the name is never checked
    assert title("with.dot", {"source_type": "url", "source": "nope"}) == "URL file upload is disabled."
    assert title(f"new_{unique}", {"original_file_name": "a.csv"}) == "File field is missed"
    assert client.delete(f"/api/files/{existing}").status_code == 200
