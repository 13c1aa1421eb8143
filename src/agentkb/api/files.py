"""`/api/files`: MindsDB's file uploads. `PUT /api/files/{name}` takes the multipart form the SDK sends
(`file`, plus `original_file_name`, `source_type`, and `name` or `source`, which are accepted and ignored) and
answers 200 `""`, as MindsDB does. The form is parsed as it streams in; the file part goes straight to disk.

MindsDB answers a DELETE of an unknown file with 400 "Error deleting file", not 404: so do we.
Both `/api/files` and `/api/files/` (MindsDB clients' form) are served, without redirects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import orjson
from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from python_multipart.exceptions import ParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from agentkb.api.deps import ServicesDep
from agentkb.api.middleware import FORM_OVERHEAD
from agentkb.api.responses import EMPTY_STRING, JSON, multipart_body, problems
from agentkb.errors import BadRequest, PayloadTooLarge
from agentkb.service import catalog
from agentkb.service.types import FileRow
from agentkb.timestamps import timestamp

router = APIRouter(prefix="/api/files", tags=["files"])

FORM_FIELDS = frozenset({"original_file_name", "source_type", "name", "source"})
JSON_FIELDS = frozenset({"source_type", "source", "original_file_name"})  # MindsDB's, for a URL source
MAX_FIELD_BYTES = 4096
MAX_PARTS = 8
MAX_JSON_BYTES = 65536

UPLOAD_BODY = multipart_body(
    {
        "original_file_name": {"type": "string", "description": "Its extension sets the format."},
        "source_type": {"type": "string", "enum": ["file"]},
        "name": {"type": "string", "description": "Ignored (the SDK sends it)."},
    },
    other_content={
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {
                    "source_type": {"type": "string", "enum": ["url"]},
                    "source": {"type": "string"},
                },
                "description": "URL sources: refused (URL file upload is disabled).",
            }
        }
    },
)


class FileRecord(BaseModel):
    name: str
    row_count: int | None = Field(description="Tabular files: rows.")
    columns: list[str] | None = Field(description="Tabular files: column names.")
    size: int = Field(description="Bytes.")
    page_count: int | None = Field(description="Documents: pages (PDF), slides (PPTX), else sections.")
    content_type: str
    extension: str
    original_name: str
    created_at: str = Field(description="UTC, `YYYY-MM-DD HH:MM:SS.ffffff` (as MindsDB).")


def file_record(row: FileRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "row_count": row.row_count,
        "columns": row.columns,
        "size": row.size_bytes,
        "page_count": row.page_count,
        "content_type": row.content_type,
        "extension": row.extension,
        "original_name": row.original_name,
        "created_at": timestamp(row.created_at),
    }


def invalid_parameters(detail: str) -> BadRequest:
    return BadRequest(detail, title="Invalid request parameters")


@router.get("", response_model=list[FileRecord])
@router.get("/", include_in_schema=False)
async def list_files(services: ServicesDep) -> Any:
    return JSON([file_record(row) for row in await services.files.list()])


@router.get("/{name}", response_model=FileRecord, responses=problems(404))
@router.get("/{name}/", include_in_schema=False)
async def get_file(name: str, services: ServicesDep) -> Any:
    return JSON(file_record(await services.files.get(name)))


@router.put(
    "/{name}",
    openapi_extra=UPLOAD_BODY,
    responses={
        200: {"description": 'Stored: MindsDB\'s body `""`', "content": EMPTY_STRING},
        **problems(400, 413),
    },
)
@router.put("/{name}/", include_in_schema=False)
async def upload_file(name: str, request: Request, services: ServicesDep) -> Any:
    files = services.files
    if not request.headers.get("content-type", "").lower().startswith("multipart/form-data"):
        await _refuse_json(name, await _read_json(request), files)
    key = catalog.check_file_name(name)  # before the body arrives (MindsDB: after it)
    if await files.find(key) is not None:
        raise catalog.file_exists(key)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > files.max_bytes + FORM_OVERHEAD:
        raise PayloadTooLarge(f"The file is larger than the upload limit of {files.max_bytes} bytes")
    form = await _receive_form(request, files)
    if form.staged is None:
        raise BadRequest('The "file" field is missing from the form', title="File field is missed")
    source_type = form.fields.get("source_type", "file")
    if source_type != "file":
        form.staged.path.unlink(missing_ok=True)
        raise _source_type_error(source_type)
    kind = catalog.archive_kind(form.filename) or catalog.archive_kind(form.fields.get("original_file_name"))
    if kind is not None:  # stored under the name of the one file inside, as MindsDB does
        await files.save_archive(form.staged, kind)
        return JSON("")
    await files.save(
        key,
        form.staged,
        original_name=form.fields.get("original_file_name") or form.filename,
        content_type=form.content_type,
    )
    return JSON("")


@router.delete(
    "/{name}",
    responses={
        200: {"description": 'Deleted: MindsDB\'s body `""`', "content": EMPTY_STRING},
        **problems(400),  # an unknown file too, as MindsDB
    },
)
@router.delete("/{name}/", include_in_schema=False)
async def delete_file(name: str, services: ServicesDep) -> Any:
    await services.files.delete(name)
    return JSON("")


# --- request bodies -----------------------------------------------------------------------------------


def _source_type_error(source_type: object) -> BadRequest:
    if source_type == "url":
        return BadRequest("URL file upload is disabled.", title="URL file upload is disabled.")
    return BadRequest(
        f'Only "file" and "url" supported as file source, got "{source_type}"', title="Wrong file source type"
    )


async def _read_json(request: Request) -> Any:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_JSON_BYTES:
            raise invalid_parameters("A JSON upload request must be a small object; send files as multipart")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(
            "The body must be multipart/form-data with a 'file' part, or JSON", title="Invalid request body"
        ) from exc


async def _refuse_json(name: str, data: Any, files: catalog.FileService) -> NoReturn:
    """A JSON body names a URL source, which is disabled; MindsDB's errors, in MindsDB's order."""
    if not isinstance(data, dict):
        raise invalid_parameters("Unexpected parameters in request")
    unexpected = set(data) - JSON_FIELDS
    if unexpected:
        raise invalid_parameters(
            f"Unexpected parameters in request: {', '.join(sorted(unexpected))}. "
            f"Allowed parameters: {', '.join(sorted(JSON_FIELDS))}"
        )
    if await files.find(name) is not None:
        raise catalog.file_exists(name.lower())
    source_type = data.get("source_type", "file")
    if source_type != "file":
        raise _source_type_error(source_type)
    raise BadRequest(
        "Send the file as multipart/form-data, in a part named 'file'", title="File field is missed"
    )


@dataclass
class _Form:
    fields: dict[str, str] = field(default_factory=dict)
    filename: str | None = None
    content_type: str | None = None
    staged: catalog.StagedBlob | None = None


@dataclass
class _Part:
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    header_name: bytes = b""
    header_value: bytes = b""


async def _receive_form(request: Request, files: catalog.FileService) -> _Form:
    """Parse the multipart body as it arrives: small text fields in memory, the `file` part to a temp file."""
    _, params = parse_options_header(request.headers.get("content-type"))
    boundary = params.get(b"boundary")
    if not boundary:
        raise BadRequest("The multipart body has no boundary", title="Invalid request body")
    part = _Part()
    events: list[tuple[str, Any]] = []

    def header_end() -> None:
        part.headers.append((part.header_name.lower(), part.header_value))
        part.header_name = part.header_value = b""

    callbacks: Any = {
        "on_part_begin": part.headers.clear,
        "on_header_field": lambda data, start, end: setattr(
            part, "header_name", part.header_name + data[start:end]
        ),
        "on_header_value": lambda data, start, end: setattr(
            part, "header_value", part.header_value + data[start:end]
        ),
        "on_header_end": header_end,
        "on_headers_finished": lambda: events.append(("headers", part.headers[:])),
        "on_part_data": lambda data, start, end: events.append(("data", data[start:end])),
        "on_part_end": lambda: events.append(("end", None)),
    }
    form = _Form()
    writer: catalog.BlobWriter | None = None
    field_name: str | None = None
    value = bytearray()
    parts = 0
    try:
        parser = MultipartParser(boundary, callbacks)
        async for chunk in request.stream():
            parser.write(chunk)
            for kind, payload in events:
                if kind == "headers":
                    parts += 1
                    field_name, filename, content_type = _describe_part(payload)
                    if parts > MAX_PARTS or (field_name not in FORM_FIELDS and field_name != "file"):
                        raise invalid_parameters(f"Unexpected form field {field_name!r}")
                    if field_name == "file":
                        if writer is not None or form.staged is not None:
                            raise invalid_parameters("Only one file may be uploaded at a time")
                        _check_filename(filename)
                        writer = files.writer()
                        form.filename, form.content_type = filename, content_type
                    value = bytearray()
                elif kind == "data" and writer is not None:
                    await writer.write(payload)
                elif kind == "data":
                    value += payload
                    if len(value) > MAX_FIELD_BYTES:
                        raise invalid_parameters(f"Form field {field_name!r} is too long")
                elif writer is not None:  # the file part ended
                    form.staged, writer = await writer.finish(), None
                elif field_name is not None:
                    form.fields[field_name] = value.decode("utf-8", errors="replace")
            events.clear()
        parser.finalize()
    except (ParseError, ValueError) as exc:
        _discard(writer, form)
        raise BadRequest(f"Malformed multipart body: {exc}", title="Invalid request body") from exc
    except BaseException:
        _discard(writer, form)
        raise
    if writer is not None:  # the body ended inside the file part
        _discard(writer, form)
        raise BadRequest("The multipart body ended before the file did", title="Invalid request body")
    return form


def _check_filename(filename: str | None) -> None:
    """A part's file name is a name, never a path (MindsDB: "Wrong file name", as a 500)."""
    if filename and (Path(filename).name != filename or "\\" in filename or filename in (".", "..")):
        raise BadRequest(f"Wrong file name: {filename}", title="Invalid file path")


def _describe_part(headers: list[tuple[bytes, bytes]]) -> tuple[str, str | None, str | None]:
    """(field name, file name, content type) of a part."""
    found = dict(headers)
    _, options = parse_options_header(found.get(b"content-disposition"))
    name = options.get(b"name")
    if name is None:
        raise BadRequest("A form part has no name", title="Invalid request body")
    filename = options.get(b"filename")
    content_type = found.get(b"content-type")
    return (
        name.decode("utf-8", errors="replace"),
        filename.decode("utf-8", errors="replace") if filename is not None else None,
        content_type.decode("latin-1") if content_type else None,
    )


def _discard(writer: catalog.BlobWriter | None, form: _Form) -> None:
    if writer is not None:
        writer.discard()
    if form.staged is not None:
        form.staged.path.unlink(missing_ok=True)
