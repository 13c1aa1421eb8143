"""What the agent runtime needs from the rest of agentkb, as small protocols it owns: the services satisfy
them structurally, so the agents package imports nothing above it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mindsdb_sql_parser import ast
from sqlalchemy import Engine

from agentkb.ingest.files.parse import ParsedFile
from agentkb.kb.search import Hit
from agentkb.sql.kbquery import KBQuery
from agentkb.storage.knowledge_bases import KnowledgeBaseRow


class KBSearch(Protocol):
    """Runs a parsed knowledge-base SELECT through the SQL endpoint's KB executor (its WHERE algebra: OR, NOT,
    `Column is not found`; LIMIT, relevance, hybrid search): (its columns, LIMIT and ORDER BY, its hits).
    A listing (no content text) with no LIMIT reads up to `listing_limit` rows."""

    async def query(
        self, statement: ast.Select, default_project: str, *, listing_limit: int | None = None
    ) -> tuple[KBQuery, list[Hit]]: ...


class KBCatalog(Protocol):
    """Looks knowledge bases up by project and name."""

    async def list(self, project_name: str) -> list[KnowledgeBaseRow]: ...

    async def get(self, project_name: str, name: str) -> KnowledgeBaseRow: ...


class DataSourceEngines(Protocol):
    """A registered data source's pooled engine and its pushdown dialect."""

    async def engine_for(self, name: str) -> tuple[Engine, str]: ...


class UploadedFile(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def columns(self) -> list[str] | None: ...  # None: a document, not a table


class UploadedTables(Protocol):
    """The uploaded files (the file service): its table files are the `files` data source's tables."""

    async def list(self) -> Sequence[UploadedFile]: ...

    async def open_parsed(self, name: str) -> ParsedFile: ...
