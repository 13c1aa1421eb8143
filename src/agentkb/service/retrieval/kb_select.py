"""`SELECT … FROM <kb>`: MindsDB's KnowledgeBaseTable.select_query, the one executor of KB SELECTs, for the SQL
endpoint (`select`, rows) and the agents' `kb_query_tool` and `kb_info_tool` (`query`, hits, through the
agents' `KBSearch` port).

- The columns of `SELECT *`: `id, chunk_id, chunk_content, metadata, distance, relevance`; a KB whose chunks
  carry metadata (declared `metadata_columns`, or keys inserted) has them as columns too, MindsDB's order:
  `id, chunk_id, chunk_content, distance, relevance, <metadata columns>, metadata` (declared ones in their
  order, then the inserted ones by name; MindsDB orders them as a Python set).
- A filter on a key that is neither declared nor carried by any chunk answers `Column is not found: <k>`
  (keys starting with `_`, MindsDB's system keys, are always allowed).
- The WHERE runs as one search when it can (the fast path), else through `kb_algebra`.
- A listing (a search with no content text) with no LIMIT reads up to 10,000 rows on the SQL endpoint; an
  agent's query passes a smaller `listing_limit`, its row cap.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest
from agentkb.kb.search import COLUMNS, Hit
from agentkb.service.retrieval.search import KnowledgeBaseGone, options_from_query
from agentkb.sql import kb_algebra
from agentkb.sql.kbquery import Condition, KBQuery, assemble, condition_parser, parse_kb_select_ast
from agentkb.storage import chunk_search

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime

    from agentkb.service.retrieval.search import SearchService
    from agentkb.storage.knowledge_bases import KnowledgeBaseRow

KB_COLUMNS = frozenset(COLUMNS)
_LEADING = ("id", "chunk_id", "chunk_content", "distance", "relevance")


class KBSelect:
    """Runs KB SELECTs through the search service; caches each KB's metadata keys per KB version."""

    def __init__(self, search: SearchService) -> None:
        self.search = search
        self._keys: dict[int, tuple[datetime, tuple[str, ...]]] = {}

    async def metadata_keys(self, kb: KnowledgeBaseRow) -> tuple[str, ...]:
        cached = self._keys.get(kb.id)
        if cached is not None and cached[0] == kb.updated_at:
            return cached[1]
        async with self.search.db.read() as conn:
            keys = tuple(await chunk_search.metadata_keys(conn, kb.storage_table))
        self._keys[kb.id] = (kb.updated_at, keys)
        return keys

    async def metadata_columns(self, kb: KnowledgeBaseRow) -> list[str]:
        declared = [c for c in kb.metadata_columns or [] if c not in KB_COLUMNS]
        inserted = [k for k in await self.metadata_keys(kb) if k not in KB_COLUMNS and k not in declared]
        return declared + inserted

    async def star_columns(self, kb: KnowledgeBaseRow) -> list[str]:
        meta = await self.metadata_columns(kb)
        return [*_LEADING, *meta, "metadata"] if meta else list(COLUMNS)

    async def select(
        self, kb: KnowledgeBaseRow, select: ast.Select, db: str, params: Mapping[str, Any] | None
    ) -> tuple[list[str], list[list[Any]]]:
        """(column names, rows) of a SELECT of columns (or *) from one KB, with WHERE, LIMIT and OFFSET."""
        shape = parse_kb_select_ast(
            ast.Select(
                targets=select.targets,
                from_table=select.from_table,
                limit=select.limit,
                offset=select.offset,
                order_by=select.order_by,
            ),
            db,
            params=params,
        )
        hits = await self.hits(kb, select, db, params, shape.limit, shape.offset)
        kb = self.search.latest(kb)  # the row as the search found it, if another process changed the KB
        if shape.columns is None:
            columns = await self.star_columns(kb)
            return columns, [row(h, columns) for h in hits]
        return list(shape.column_names or shape.columns), [row(h, shape.columns) for h in hits]

    async def query(
        self, statement: ast.Select, default_project: str, *, listing_limit: int | None = None
    ) -> tuple[KBQuery, list[Hit]]:
        """A KB SELECT naming its KB (the agents' tools): (its columns, LIMIT, OFFSET and ORDER BY, its hits).
        The statement is checked first (a statement other than a SELECT is a 400); ORDER BY is read, not
        applied: the hits come in search order."""
        shape = parse_kb_select_ast(statement, default_project, where=False)
        project = shape.project or default_project
        kb = await self.search.cached_knowledge_base(project, shape.kb)
        try:
            hits = await self.hits(
                kb, statement, default_project, None, shape.limit, shape.offset, listing_limit=listing_limit
            )
        except KnowledgeBaseGone:  # dropped (perhaps created again) by another process since it was cached
            kb = await self.search.knowledge_base(project, shape.kb)
            hits = await self.hits(
                kb, statement, default_project, None, shape.limit, shape.offset, listing_limit=listing_limit
            )
        return shape, hits

    async def hits(
        self,
        kb: KnowledgeBaseRow,
        select: ast.Select,
        db: str,
        params: Mapping[str, Any] | None,
        limit: int | None,
        offset: int | None,
        *,
        listing_limit: int | None = None,
    ) -> list[Hit]:
        project, name, parser = condition_parser(select, db, params)
        tree = kb_algebra.condition_tree(select.where, parser)
        await self._check_columns(kb, tree)
        if kb_algebra.is_simple(tree):  # the fast path: one search
            conditions: tuple[Condition, ...] = () if tree is None else _flat(tree)
            query = assemble(project, name, conditions, limit=limit, offset=offset)
            return await self._search(kb, query, listing_limit)

        async def search(call: kb_algebra.SearchCall) -> list[Hit]:
            content: tuple[Condition, ...] = () if call.content is None else (("content", "=", call.content),)
            query = assemble(project, name, (*content, *call.conditions), limit=call.limit)
            if call.disable_reranking:
                query = replace(query, reranking=False)
            return await self._search(kb, query, listing_limit)

        assert tree is not None
        return await kb_algebra.run(tree, search, limit, offset or 0)

    async def _search(self, kb: KnowledgeBaseRow, query: KBQuery, listing_limit: int | None) -> list[Hit]:
        if listing_limit is not None and query.content is None and query.limit is None:
            query = replace(query, limit=listing_limit)
        return await self.search.search_kb(kb, options_from_query(query))

    async def _check_columns(self, kb: KnowledgeBaseRow, tree: kb_algebra.Tree | None) -> None:
        """MindsDB's `Column is not found: k` for a filter on a key the KB has never had."""
        declared = set(kb.metadata_columns or [])
        unknown = [k for k in _keys(tree) if k not in declared and not k.startswith("_")]
        if not unknown:
            return
        present = set(await self.metadata_keys(kb))
        if any(key not in present for key in unknown):  # this process may not have seen a newer insert
            fresh = await self.search.knowledge_base(kb.project_name, kb.name)
            present = set(await self.metadata_keys(fresh)) | set(fresh.metadata_columns or [])
        for key in unknown:
            if key not in present:
                raise BadRequest(f"Column is not found: {key}")


def row(hit: Hit, columns: tuple[str, ...] | list[str]) -> list[Any]:
    values = hit.as_dict()
    return [values[c] if c in KB_COLUMNS else hit.metadata.get(c.removeprefix("metadata.")) for c in columns]


_NOT_METADATA = KB_COLUMNS | {"content", "reranking", "hybrid_search", "hybrid_search_alpha"}


def _keys(tree: kb_algebra.Tree | None) -> list[str]:
    if tree is None:
        return []
    if isinstance(tree, kb_algebra.Block):
        return [k for item in tree.items for k in _keys(item)]
    return [] if tree[0] in _NOT_METADATA else [tree[0]]


def _flat(tree: kb_algebra.Tree) -> tuple[Condition, ...]:
    if isinstance(tree, kb_algebra.Block):
        return tuple(c for item in tree.items for c in _flat(item))
    return (tree,)
