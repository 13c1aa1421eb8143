"""Knowledge-base export and import: over HTTP (`GET …/export`, `POST …/import`) and with `agentkb export` /
`agentkb import` (local database and `--url`). An import embeds nothing (the stub embedder sees no request),
keeps search results identical, needs the secrets the file leaves out, and refuses bad files, taken names
and missing projects without leaving anything behind."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.helpers import assert_problem, export_header
from tests.openai_stub import OpenAIStub

P = "/api/projects/mindsdb"
SECRET = "sk-export-test-0123456789abcdef"
OTHER_SECRET = "sk-import-test-fedcba9876543210"
ROWS = [
    {"id": i, "content": f"Fact {i}: {animal} {habit}.", "kind": kind}
    for i, (animal, habit, kind) in enumerate(
        [
            ("otters", "hold hands while they sleep", "mammal"),
            ("octopuses", "have three hearts", "mollusc"),
            ("crows", "remember human faces", "bird"),
            ("bees", "dance to show where flowers are", "insect"),
            ("owls", "turn their heads far round", "bird"),
        ]
    )
]
QUERIES = ["which animal sleeps holding hands", "birds that remember", "hearts"]


@pytest.fixture()
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


def records(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in gzip.decompress(data).splitlines()]


def pack(lines: list[dict[str, Any]]) -> bytes:
    return gzip.compress(b"".join(orjson.dumps(r) + b"\n" for r in lines))


def upload(client: httpx.Client, data: bytes, project: str = "mindsdb", **fields: str) -> httpx.Response:
    return client.post(
        f"/api/projects/{project}/knowledge_bases/import",
        data=fields,
        files={"file": ("kb.agentkb.jsonl.gz", data, "application/gzip")},
    )


def search_all(client: httpx.Client, kb: str, **extra: Any) -> list[list[tuple[str, str, Any, Any]]]:
    out = []
    for query in QUERIES:
        r = client.post(f"{P}/knowledge_bases/{kb}/search", json={"query": query, "limit": 5, **extra})
        assert r.status_code == 200, r.text
        out.append([(h["chunk_id"], h["chunk_content"], h["distance"], h["relevance"]) for h in r.json()])
    return out


def make_kb(client: httpx.Client, name: str, model: dict[str, Any] | None = None) -> None:
    body: dict[str, Any] = {"name": name, "metadata_columns": ["kind"]}
    if model is not None:
        body["embedding_model"] = model
    r = client.post(f"{P}/knowledge_bases", json={"knowledge_base": body})
    assert r.status_code == 201, r.text
    r = client.put(f"{P}/knowledge_bases/{name}", json={"knowledge_base": {"rows": ROWS}})
    assert r.status_code == 200, r.text


def test_http_round_trip_embeds_nothing(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    kb, copy = f"exp_{unique}", f"imp_{unique}"
    make_kb(client, kb, {**stub.embedding_model(), "api_key": SECRET})
    before = search_all(client, kb)

    r = client.get(f"{P}/knowledge_bases/{kb}/export")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/gzip"
    assert f'filename="{kb}.agentkb.jsonl.gz"' in r.headers["content-disposition"]
    data = r.content
    assert SECRET.encode() not in gzip.decompress(data)  # the secret never leaves, sealed or not
    assert b"enc:v1:" not in gzip.decompress(data)
    lines = records(data)
    header, chunks, end = lines[0], lines[1:-1], lines[-1]
    assert header["type"] == "header" and header["format"] == "agentkb-kb-export" and header["version"] == 1
    assert header["secrets_omitted"] == ["embedding_model.api_key"]
    assert "api_key" not in header["knowledge_base"]["embedding_model"]
    assert header["knowledge_base"]["metadata_columns"] == ["kind"]
    assert header["documents"] == len(ROWS) and header["chunks"] == len(chunks) == len(ROWS)
    assert end == {"type": "end", "chunks": len(ROWS)}
    assert {c["metadata"]["kind"] for c in chunks} == {"mammal", "mollusc", "bird", "insect"}

    # the omitted secret is required
    problem = assert_problem(upload(client, data, name=copy), 400)
    assert problem["title"] == "Secrets required" and "embedding_model.api_key" in problem["detail"]
    assert client.get(f"{P}/knowledge_bases/{copy}").status_code == 404

    requests_before = len(stub.requests)
    r = upload(client, data, name=copy, embedding_api_key=OTHER_SECRET)
    assert r.status_code == 201, r.text
    assert len(stub.requests) == requests_before  # nothing was embedded
    record = r.json()
    assert record["name"] == copy and record["chunk_count"] == len(ROWS)
    assert record["document_count"] == len(ROWS)
    assert record["embedding_model"]["api_key"] == "******"
    assert record["metadata_columns"] == ["kind"]

    assert search_all(client, copy) == before
    # the imported KB embeds its queries with the key given on import
    assert stub.requests[-1].headers["authorization"] == f"Bearer {OTHER_SECRET}"
    hybrid = {"hybrid_search": True, "hybrid_search_alpha": 0.5}
    assert search_all(client, copy, **hybrid) == search_all(client, kb, **hybrid)

    # an export of the copy has the same chunks and vectors
    again = records(client.get(f"{P}/knowledge_bases/{copy}/export").content)
    assert again[1:] == lines[1:]

    # the name is taken now
    problem = assert_problem(upload(client, data, name=copy, embedding_api_key=OTHER_SECRET), 409)
    assert copy in problem["detail"]
    # same name as exported: taken too
    assert_problem(upload(client, data, embedding_api_key=OTHER_SECRET), 409)


def test_bad_files_leave_nothing(client: httpx.Client, unique: str) -> None:
    name = f"bad_{unique}"
    header = export_header(name, {"provider": "local", "model_name": "all-MiniLM-L6-v2"})
    vec = "AACAPwAAAEAAAEBA"  # float32 [1, 2, 3], base64
    chunk = {
        "type": "chunk",
        "chunk_id": "a:0",
        "doc_id": "a",
        "content": "hello",
        "content_hash": "h",
        "metadata": {},
        "embedding": vec,
    }
    good = [header, chunk, {"type": "end", "chunks": 1}]
    cases: list[tuple[bytes, str]] = [
        (b"plain text, not gzip", "not gzip"),
        (gzip.compress(b"not json\n"), "line 1: not JSON"),
        (pack([{"type": "header", "format": "other", "version": 1}]), "Not an agentkb export"),
        (pack([{**header, "version": 99}, *good[1:]]), "upgrade agentkb"),
        (pack(good[:2]), "cut short"),  # no end record
        (pack(good)[:-12], "cut short or corrupt"),  # gzip cut off
        (pack([header, {**chunk, "embedding": "AACAPwAAAEA="}, good[2]]), "3 float32 values"),
        (pack([header, {**chunk, "embedding": "!!"}, good[2]]), "not base64"),
        (pack([header, {**chunk, "metadata": []}, good[2]]), "'metadata' must be an object"),
        (pack([header, chunk, chunk, {"type": "end", "chunks": 2}]), "more than once"),
        (pack([header, chunk, {"type": "end", "chunks": 5}]), "counts 5 chunks"),
        (pack([{**header, "knowledge_base": {**header["knowledge_base"], "vector_dim": 0}}]), "vector_dim"),
    ]
    for data, message in cases:
        problem = assert_problem(upload(client, data), 400)
        assert message in problem["detail"], (message, problem)
        assert client.get(f"{P}/knowledge_bases/{name}").status_code == 404, message
    problem = assert_problem(upload(client, pack(good), name="1bad"), 400)
    assert "'name'" in problem["detail"]

    # the same file, whole, imports (so the refusals above were about the defects)
    r = upload(client, pack(good))
    assert r.status_code == 201, r.text
    assert r.json()["chunk_count"] == 1
    assert_problem(upload(client, pack(good), project=f"nope_{unique}"), 404)
    client.delete(f"{P}/knowledge_bases/{name}")


def test_import_request_shape(client: httpx.Client) -> None:
    r = client.post(f"{P}/knowledge_bases/import", json={"file": "x"})
    assert "multipart/form-data" in assert_problem(r, 400)["detail"]
    r = client.post(f"{P}/knowledge_bases/import", data={"name": "x"}, files={"other": ("f", b"x")})
    assert_problem(r, 400)
    r = upload(client, b"x", secrets="[1]")
    assert "'secrets'" in assert_problem(r, 400)["detail"]
    assert_problem(client.get(f"{P}/knowledge_bases/no_such_kb_xyz/export"), 404)


def export_lines(client: httpx.Client, kb: str) -> list[dict[str, Any]]:
    return records(client.get(f"{P}/knowledge_bases/{kb}/export").content)


def agentkb(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentkb", *map(str, args)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env, "COLUMNS": "200", "NO_COLOR": "1"},
    )


def test_cli_round_trip_local_model(
    client: httpx.Client, base_url: str, pg_url: str, tmp_path: Path, unique: str
) -> None:
    """A local-model KB: `agentkb export --url` (HTTP), `agentkb import` on the database directly, then
    `agentkb export` from the database and `agentkb import --url`: search results stay identical."""
    kb = f"cli_{unique}"
    client = httpx.Client(base_url=base_url, timeout=600)  # the first use of the local model loads it
    make_kb(client, kb)  # the default embedder: all-MiniLM-L6-v2, in process
    before = search_all(client, kb)
    env = {"AGENTKB_DATABASE_URL": pg_url, "AGENTKB_DATA_DIR": str(tmp_path / "data")}

    remote_file = tmp_path / "remote.agentkb.jsonl.gz"
    done = agentkb("export", kb, remote_file, "--url", base_url, env=env)
    assert done.returncode == 0, done.stderr
    assert f"{len(ROWS)} chunks" in done.stdout
    assert not Path(f"{remote_file}.part").exists()
    again = agentkb("export", kb, remote_file, "--url", base_url, env=env)
    assert again.returncode == 2 and "--force" in again.stderr  # no overwrite by accident

    done = agentkb("import", remote_file, "--as", f"{kb}_local", env=env)  # the database, directly
    assert done.returncode == 0, done.stderr + done.stdout
    assert f"imported mindsdb.{kb}_local: {len(ROWS)} documents, {len(ROWS)} chunks" in done.stdout
    assert search_all(client, f"{kb}_local") == before

    local_file = tmp_path / "local.agentkb.jsonl.gz"
    done = agentkb("export", f"{kb}_local", local_file, env=env)
    assert done.returncode == 0, done.stderr
    done = agentkb("import", local_file, "--as", f"{kb}_remote", "--url", base_url, env=env)
    assert done.returncode == 0, done.stderr + done.stdout
    assert search_all(client, f"{kb}_remote") == before
    assert export_lines(client, f"{kb}_remote")[1:] == records(remote_file.read_bytes())[1:]

    taken = agentkb("import", local_file, "--as", kb, "--url", base_url, env=env)
    assert taken.returncode == 1 and "already exists" in taken.stderr
    missing = agentkb("export", "no_such_kb_xyz", tmp_path / "x.gz", "--url", base_url, env=env)
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    assert not (tmp_path / "x.gz").exists() and not (tmp_path / "x.gz.part").exists()


def test_cli_import_needs_the_secret(
    client: httpx.Client, stub: OpenAIStub, pg_url: str, tmp_path: Path, unique: str
) -> None:
    kb = f"cli_sec_{unique}"
    make_kb(client, kb, {**stub.embedding_model(), "api_key": SECRET})
    file = tmp_path / "kb.gz"
    file.write_bytes(client.get(f"{P}/knowledge_bases/{kb}/export").content)
    env = {"AGENTKB_DATABASE_URL": pg_url, "AGENTKB_DATA_DIR": str(tmp_path / "data")}
    refused = agentkb("import", file, "--as", f"{kb}_2", env=env)
    assert refused.returncode == 1 and "embedding_model.api_key" in refused.stderr
    requests_before = len(stub.requests)
    done = agentkb(
        "import", file, "--as", f"{kb}_2", "--secret", f"embedding_model.api_key={OTHER_SECRET}", env=env
    )
    assert done.returncode == 0, done.stderr
    assert len(stub.requests) == requests_before
    assert client.post(f"{P}/knowledge_bases/{kb}_2/search", json={"query": "otters"}).status_code == 200
    assert stub.requests[-1].headers["authorization"] == f"Bearer {OTHER_SECRET}"


def test_export_streams_a_large_kb_in_bounded_pieces(
    client: httpx.Client, stub: OpenAIStub, unique: str
) -> None:
    """3,000 chunks: the response arrives in several pieces (batches), and imports whole."""
    kb = f"big_{unique}"
    r = client.post(
        f"{P}/knowledge_bases",
        json={"knowledge_base": {"name": kb, "embedding_model": stub.embedding_model()}},
    )
    assert r.status_code == 201, r.text
    rows = [{"id": i, "content": f"row {i} about topic {i % 17}"} for i in range(3000)]
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows}})
    assert r.status_code == 200, r.text
    pieces = 0
    buffer = io.BytesIO()
    with client.stream("GET", f"{P}/knowledge_bases/{kb}/export") as response:
        for piece in response.iter_raw():
            pieces += 1
            buffer.write(piece)
    assert pieces > 1
    lines = records(buffer.getvalue())
    assert len(lines) == 3002 and lines[-1] == {"type": "end", "chunks": 3000}
    before = len(stub.requests)
    r = upload(client, buffer.getvalue(), name=f"{kb}_copy", embedding_api_key="x")
    assert r.status_code == 201, r.text
    assert r.json()["chunk_count"] == 3000 and len(stub.requests) == before
