"""KB insert `files: [...]`: uploaded files as documents — tables become rows (the `rows` path),
documents one document per page, slide or section with `_source` = the file name."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from agentkb.errors import BadRequest, NotFound
from agentkb.ingest.files.parse import ParsedFile, file_documents
from agentkb.ingest.files.tables import Tabular
from agentkb.ingest.request import BATCH_ROWS, InsertInput, SourceRun
from agentkb.kb.documents import Document, row_documents
from agentkb.validation import check_storable


class UploadedFiles(Protocol):
    """The uploaded files a KB insert may name (the file service)."""

    async def get(self, name: str) -> object: ...

    async def open_parsed(self, name: str) -> ParsedFile: ...


def file_names(value: Any) -> list[str]:
    """`["name", ...]` or `[{"name": ...}, ...]` (the SDK sends paths; a path's last part, without its
    extension, is the uploaded file's name, as the SDK names uploads)."""
    if not isinstance(value, list) or not value:
        raise BadRequest("'files' must be a non-empty list of file names", title="Invalid files")
    names = []
    for item in value:
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str) or not name.strip():
            raise BadRequest(f"'files' entry {item!r} is not a file name", title="Invalid files")
        names.append(name.rsplit("/", 1)[-1].split(".")[0].lower())
    return names


class FileSource:
    def __init__(self, files: UploadedFiles) -> None:
        self.files = files

    async def validate(self, given: InsertInput) -> dict[str, Any]:
        names = file_names(given.files)
        for name in names:
            try:
                await self.files.get(name)
            except NotFound as exc:
                raise BadRequest(
                    f"File {name} was not uploaded (PUT /api/files/{name} first)", title="Invalid files"
                ) from exc
        return {"files": names}

    async def documents(self, run: SourceRun) -> AsyncIterator[list[Document]]:
        progress = run.progress
        for name in run.given.files or []:
            parsed = await self.files.open_parsed(name)
            if isinstance(parsed, Tabular):
                rows = check_storable(parsed.rows, f"file {name}")
                progress.add_items(len(rows))
                for start in range(0, len(rows), BATCH_ROWS):
                    try:
                        batch = list(
                            row_documents(
                                rows[start : start + BATCH_ROWS], run.spec, start_index=start, source=name
                            )
                        )
                    except BadRequest as exc:
                        raise BadRequest(f"File {name}: {exc.detail}", title=exc.title) from exc
                    yield batch
            else:
                documents = file_documents(parsed, name)
                progress.add_items(len(documents))
                for start in range(0, len(documents), BATCH_ROWS):
                    yield documents[start : start + BATCH_ROWS]
