"""Moving a knowledge base between servers: export it to a file (`kb/transfer.py`'s format) and import one,
streamed both ways. An import writes the vectors it reads — nothing is embedded — in one transaction: a
bad or cut-short file, a taken name or a failure leaves nothing behind."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any

from sqlalchemy.exc import IntegrityError

from agentkb import __version__
from agentkb.errors import Conflict, kb_not_found, project_not_found
from agentkb.kb import model_endpoints
from agentkb.kb.model_endpoints import describe
from agentkb.kb.transfer import ExportEncoder, ExportReader, Header, bad_file, put_secrets, strip_secrets
from agentkb.secrecy import SecretBox, sealed_key_ids
from agentkb.service.catalog import kb_lookup, projects
from agentkb.service.catalog.kb_admin import index_options
from agentkb.service.platform import access
from agentkb.storage import chunks, transfer
from agentkb.storage import knowledge_bases as repo
from agentkb.storage.db import Database
from agentkb.storage.knowledge_bases import KnowledgeBaseRow
from agentkb.validation import check_name

BATCH = 1000
Progress = Callable[[int, int | None], None]
"""(chunks done, chunks in all if known), after each batch."""

# The HTTP form fields and CLI options that give the usual secrets, by the path they fill.
SECRET_FIELDS = {
    "embedding_api_key": "embedding_model.api_key",
    "reranking_api_key": "reranking_model.api_key",
}


def conflict(name: str) -> Conflict:
    return Conflict(f"Knowledge Base with name {name} already exists", title="Knowledge Base already exists")


@dataclass(frozen=True, slots=True)
class Imported:
    kb: KnowledgeBaseRow
    documents: int
    chunks: int
    endpoints: dict[str, str]  # each model and where it sends its requests (and keys)


def _definition(kb: KnowledgeBaseRow) -> dict[str, Any]:
    return {
        "name": kb.name,
        "embedding_model": kb.embedding_model,
        "reranking_model": kb.reranking_model,
        "metadata_columns": kb.metadata_columns,
        "content_columns": kb.content_columns,
        "id_column": kb.id_column,
        "params": kb.params,
        "vector_dim": kb.vector_dim,
    }


class TransferService:
    def __init__(
        self, db: Database, *, box: SecretBox | None = None, max_inflated_bytes: int | None = None
    ) -> None:
        self.db = db
        self.box = box or SecretBox.from_environment()
        self.max_inflated_bytes = (
            max_inflated_bytes  # an import file's, inflated (None: the format's default)
        )

    async def export(
        self, project_name: str, kb_name: str, on_progress: Progress | None = None
    ) -> AsyncIterator[bytes]:
        """The export file of a knowledge base as a stream of gzip pieces. Unknown project or KB: 404
        here, before any byte. The KB is read in one snapshot; its secrets are left out (never revealed)."""
        kb = await kb_lookup.read(self.db, project_name, kb_name)
        return self._export(kb.id, kb_name, on_progress)

    async def _export(self, kb_id: int, kb_name: str, on_progress: Progress | None) -> AsyncIterator[bytes]:
        encoder = ExportEncoder()
        async with self.db.transaction() as conn:
            await transfer.snapshot(conn)
            kb = await repo.get_by_id(conn, kb_id)
            if (
                kb is None
            ):  # dropped between the lookup and the snapshot: the file ends without its end record
                raise kb_not_found(kb_name)
            documents, total = await chunks.counts(conn, kb.storage_table)
            definition, omitted = strip_secrets(_definition(kb))
            yield encoder.header(
                definition,
                omitted,
                agentkb_version=__version__,
                exported_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                project=kb.project_name,
                documents=documents,
                chunks=total,
            )
            async for rows in transfer.chunk_batches(conn, kb.storage_table, BATCH):
                yield await asyncio.to_thread(encoder.chunk_rows, rows)
                if on_progress is not None:
                    on_progress(encoder.chunks, total)
        yield encoder.end()

    async def import_kb(
        self,
        project_name: str,
        source: IO[bytes],
        *,
        name: str | None = None,
        secrets: Mapping[str, str] | None = None,
        on_progress: Progress | None = None,
    ) -> Imported:
        """Create a knowledge base from an export file (`name`: another name than the file's). `secrets`
        (path → value, e.g. `embedding_model.api_key`) gives back what the export left out; each is
        sealed before it is stored. The models' endpoints are checked (`kb.model_endpoints`) and told in
        the answer and with a missing secret: an imported KB's keys go only where the operator sees. 400: a
        bad file, a bad endpoint or a missing secret; 404: no such project; 409: the name is taken; 413: the
        file inflates past `max_inflated_bytes`."""
        access.require_write("importing a knowledge base")
        access.require_project(project_name)
        reader = ExportReader(source, max_inflated=self.max_inflated_bytes)
        header = await asyncio.to_thread(reader.read_header)
        kb_name = check_name(name if name is not None else header.definition["name"], "name")
        if sealed_key_ids(header.definition):  # it would be decrypted with this server's key
            raise bad_file("line 1: the definition holds an encrypted value; an export never does")
        where = model_endpoints.check_endpoints(header.definition)
        definition = put_secrets(header.definition, header.secrets_omitted, secrets or {}, describe(where))
        model_endpoints.check_endpoints(definition)  # a secret given at an endpoint's path
        async with self.db.connect() as conn:  # fail fast, before the file is read
            project = await projects.resolve(conn, project_name)
            if await repo.get(conn, project.id, kb_name) is not None:
                raise conflict(kb_name)
        try:
            async with self.db.transaction() as conn:
                project = await projects.resolve(conn, project_name)
                kb = await self._create(conn, project.id, kb_name, definition, header)
                done = 0
                while batch := await asyncio.to_thread(reader.read_chunks, BATCH):
                    await transfer.copy_chunks(conn, kb.storage_table, batch)
                    done += len(batch)
                    if on_progress is not None:
                        on_progress(done, header.chunks)
                # the vector index, built once over every row (as CREATE INDEX ON KNOWLEDGE_BASE does)
                await chunks.rebuild_vector_index(
                    conn, kb.storage_table, kb.vector_dim, kb.params.get("vector_index")
                )
                documents, total = await chunks.counts(conn, kb.storage_table)
        except IntegrityError as exc:  # the project was deleted meanwhile
            raise project_not_found(project_name) from exc
        return Imported(kb, documents, total, model_endpoints.endpoints(definition))

    async def _create(
        self, conn: Any, project_id: int, name: str, definition: dict[str, Any], header: Header
    ) -> KnowledgeBaseRow:
        kb_id = await repo.next_id(conn)
        table = chunks.table_name(kb_id)
        params = dict(definition["params"])
        if params.get("vector_index") is not None:  # CREATE INDEX ON KNOWLEDGE_BASE's m / ef_construction
            given = params["vector_index"]
            params["vector_index"] = index_options(given if isinstance(given, dict) else {"m": given})
        row = {
            "id": kb_id,
            "project_id": project_id,
            "name": name,
            "embedding_model": self.box.seal(definition["embedding_model"]),
            "reranking_model": self.box.seal(definition["reranking_model"]),
            "metadata_columns": definition["metadata_columns"],
            "content_columns": definition["content_columns"],
            "id_column": definition["id_column"],
            "params": self.box.seal(params),
            "storage_table": table,
            "vector_dim": header.vector_dim,
        }
        if not await repo.insert_new(conn, row):
            raise conflict(name)
        await chunks.create_chunk_table(conn, table, header.vector_dim)
        kb = await repo.get_by_id(conn, kb_id)
        assert kb is not None
        return kb
