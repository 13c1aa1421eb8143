"""Export and import of knowledge bases: `GET …/knowledge_bases/{kb}/export` streams the export file;
`POST …/knowledge_bases/import` takes one (multipart upload) and creates the knowledge base from it."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from starlette.datastructures import UploadFile

from agentkb.api.deps import ServicesDep
from agentkb.api.responses import JSON, multipart_body, problems
from agentkb.api.schemas import KnowledgeBaseRecord, kb_record
from agentkb.errors import BadRequest
from agentkb.service.catalog import SECRET_FIELDS

router = APIRouter(prefix="/api/projects/{project_name}/knowledge_bases", tags=["knowledge bases"])

MEDIA_TYPE = "application/gzip"
SUFFIX = ".agentkb.jsonl.gz"
MAX_FIELD_BYTES = 64 * 1024
FIELDS = ("name", "secrets", *SECRET_FIELDS)

EXPORT_RESPONSE: dict[str, Any] = {
    "description": "The export file (gzip-compressed JSON lines: a header with the knowledge base's "
    "definition without its secrets, one record per chunk with its vector, an end record), streamed.",
    "content": {MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    "headers": {
        "Content-Disposition": {
            "description": '`attachment; filename="<kb>.agentkb.jsonl.gz"`',
            "schema": {"type": "string"},
        }
    },
}

IMPORT_BODY = multipart_body(
    {
        "name": {
            "type": "string",
            "description": "The new knowledge base's name (default: the exported one's).",
        },
        "embedding_api_key": {
            "type": "string",
            "description": "The embedding model's `api_key`, which exports leave out; "
            "required when the exported model had one.",
        },
        "reranking_api_key": {
            "type": "string",
            "description": "The reranking model's `api_key`; required when it had one.",
        },
        "secrets": {
            "type": "string",
            "contentMediaType": "application/json",
            "description": 'Any other left-out secret: a JSON object {"<path>": "<value>"} '
            "keyed by the paths the file's header lists in `secrets_omitted`.",
        },
    },
    file_description="An export file (from `GET …/knowledge_bases/{kb_name}/export` or `agentkb export`).",
    file_type=MEDIA_TYPE,
)


@router.get(
    "/{kb_name}/export",
    response_class=StreamingResponse,
    responses={200: EXPORT_RESPONSE, **problems(404)},
)
async def export_knowledge_base(project_name: str, kb_name: str, services: ServicesDep) -> Any:
    """Export a knowledge base — definition, documents' chunks, metadata and vectors — as one file, read
    in one snapshot and streamed. Secrets (the models' `api_key`s) are left out; give them on import."""
    stream = await services.transfer.export(project_name, kb_name)
    return StreamingResponse(
        stream,
        media_type=MEDIA_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{kb_name}{SUFFIX}"'},
    )


def _secrets(fields: dict[str, str]) -> dict[str, str]:
    given: dict[str, str] = {}
    if fields.get("secrets"):
        try:
            parsed = orjson.loads(fields["secrets"])
        except orjson.JSONDecodeError as exc:
            raise BadRequest("'secrets' must be a JSON object", title="Invalid request parameters") from exc
        if not isinstance(parsed, dict) or not all(isinstance(v, str) for v in parsed.values()):
            raise BadRequest(
                "'secrets' must be a JSON object of strings {path: value}", title="Invalid request parameters"
            )
        given.update(parsed)
    for field, path in SECRET_FIELDS.items():
        if fields.get(field):
            given[path] = fields[field]
    return given


@router.post(
    "/import",
    status_code=201,
    response_model=KnowledgeBaseRecord,
    openapi_extra=IMPORT_BODY,
    responses=problems(400, 404, 409, 413),
)
async def import_knowledge_base(project_name: str, request: Request, services: ServicesDep) -> Any:
    """Create a knowledge base from an export file, with the file's vectors (nothing is embedded), in
    one transaction: a bad or cut-short file (400), a missing secret (400) or a taken name (409) leaves
    nothing behind. Answers the new knowledge base's record with its counts."""
    if not request.headers.get("content-type", "").lower().startswith("multipart/form-data"):
        raise BadRequest(
            "Send the export file as multipart/form-data (field 'file'; optional 'name', "
            "'embedding_api_key', 'reranking_api_key', 'secrets')",
            title="Invalid request body",
        )
    async with request.form(max_files=1, max_fields=len(FIELDS), max_part_size=MAX_FIELD_BYTES) as form:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise BadRequest("The form has no file part 'file'", title="Invalid request body")
        fields: dict[str, str] = {}
        for key, value in form.multi_items():
            if key == "file":
                continue
            if key not in FIELDS or not isinstance(value, str):
                raise BadRequest(
                    f"Unknown form field {key!r}; use file, {', '.join(FIELDS)}", title="Invalid request body"
                )
            fields[key] = value
        imported = await services.transfer.import_kb(
            project_name, upload.file, name=fields.get("name") or None, secrets=_secrets(fields)
        )
    record = kb_record(imported.kb)
    return JSON(
        {
            **record,
            "document_count": imported.documents,
            "chunk_count": imported.chunks,
            "endpoints": imported.endpoints,
        },
        status_code=201,
    )
