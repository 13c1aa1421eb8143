"""MindsDB's SQL for loading knowledge bases: `INSERT INTO <kb> SELECT ... [USING ...]` (from a data source or
an uploaded file, `files.<name>`), `INSERT INTO <kb> (...) VALUES ...`, `DROP TABLE files.<name>` and
`USE <database>`. `service/sql.py` dispatches these statements here.

`INSERT ... SELECT` options (MindsDB's `USING`):
- `kb_no_upsert = true`: a first load, nothing read back; `kb_skip_existing = true`: documents whose id is stored
  already are left as they are (not embedded);
- `batch_size = n` [, `track_column = c`] [, `error = 'skip'`] [, `threads = n`, accepted and ignored]: a
  partitioned insert, run in the background (`service/ingest_partitions.py`); the statement answers with the
  query's record (`ID`, ...), followed in `information_schema.queries`.
With the `autobatch_inserts` setting, an insert whose source has the KB's id column is partitioned the same way
(MindsDB's autobatch: 1000 rows, tracked by that column).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest, NotFound
from agentkb.ingest.request import InsertInput
from agentkb.service.query_sources import FILES
from agentkb.service.sql_queries import SQLQueries, record_answer
from agentkb.sql.names import two_part

if TYPE_CHECKING:
    from agentkb.service.data_sources import DataSourceService
    from agentkb.service.files import FileService
    from agentkb.service.ingest import IngestService
    from agentkb.service.knowledge_bases import KnowledgeBaseService
    from agentkb.service.projects import ProjectService
    from agentkb.service.query_sources import QuerySources
    from agentkb.service.sql import Result

KB_OPTIONS = ("kb_no_upsert", "kb_skip_existing")
PARTITION_OPTIONS = ("batch_size", "track_column", "error", "threads")
AUTOBATCH_SIZE = 1000  # MindsDB's default_batch_size


def _result(kind: str, *, affected_rows: int | None = None, db: str = "mindsdb") -> Result:
    from agentkb.service.sql import Result  # sql.py dispatches here: imported late, not at module load

    return Result(kind, affected_rows=affected_rows, db=db)


def _plain(value: Any) -> Any:
    """A USING value as Python: `track_column = Id` is an identifier, `batch_size = 20` a constant."""
    if isinstance(value, ast.Identifier):
        return str(value.parts[-1])
    if isinstance(value, ast.Constant):
        return value.value
    return value


def _flag(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise BadRequest(f"USING {name} must be true or false", title="Invalid insert option")


def insert_options(using: dict[str, Any]) -> tuple[dict[str, bool], dict[str, Any] | None]:
    """(kb options, partition) from an INSERT ... SELECT's USING clause; the partition is None without
    `batch_size` (as MindsDB, which partitions only then)."""
    given = {str(k).lower(): _plain(v) for k, v in using.items()}
    unknown = sorted(set(given) - set(KB_OPTIONS) - set(PARTITION_OPTIONS))
    if unknown:
        raise BadRequest(
            f"Unknown insert option(s) {', '.join(unknown)}; INSERT INTO <kb> SELECT ... USING takes "
            f"{', '.join(KB_OPTIONS + PARTITION_OPTIONS)}",
            title="Invalid insert option",
        )
    options = {k: _flag(given[k], k) for k in KB_OPTIONS if k in given}
    batch_size = given.get("batch_size")
    if batch_size is None:
        if "track_column" in given:
            raise BadRequest(
                "USING track_column partitions an insert of batch_size rows: give batch_size too",
                title="Invalid insert option",
            )
        return options, None
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise BadRequest("USING batch_size must be a positive integer", title="Invalid insert option")
    partition: dict[str, Any] = {"batch_size": batch_size}
    track = given.get("track_column")
    if track is not None:
        if not isinstance(track, str) or not track:
            raise BadRequest("USING track_column must name a column", title="Invalid insert option")
        partition["track_column"] = track
    error = given.get("error")
    if error is not None:
        if str(error).lower() not in ("raise", "skip"):
            raise BadRequest("USING error must be 'raise' or 'skip'", title="Invalid insert option")
        partition["error"] = str(error).lower()
    return options, partition


class SQLInsert:
    def __init__(
        self,
        *,
        projects: ProjectService,
        knowledge_bases: KnowledgeBaseService,
        data_sources: DataSourceService,
        ingest: IngestService,
        files: FileService,
        sources: QuerySources,
        autobatch: bool = False,
    ) -> None:
        self.projects = projects
        self.knowledge_bases = knowledge_bases
        self.data_sources = data_sources
        self.ingest = ingest
        self.files = files
        self.sources = sources
        self.autobatch = autobatch
        self.queries = SQLQueries(ingest)

    async def _is_project(self, name: str) -> bool:
        try:
            await self.projects.get(name)
            return True
        except NotFound:
            return False

    # --- INSERT -------------------------------------------------------------------------------------------
    async def insert(self, insert: ast.Insert, db: str) -> Result:
        project, name = two_part(insert.table, db)
        try:
            kb = await self.knowledge_bases.get(project, name)
        except NotFound:
            raise BadRequest(
                f"INSERT is supported into knowledge bases only; {project}.{name} is not one"
            ) from None
        if insert.from_select is None:
            return await self._insert_values(insert, project, name)
        select = copy.deepcopy(insert.from_select)
        options, partition = insert_options(getattr(select, "using", None) or {})
        if isinstance(select, ast.Select):
            select.using = None
            await self._qualify(select, db)
        query = select.to_string()
        if partition is None and self.autobatch and isinstance(select, ast.Select):
            track = kb.id_column or "id"  # MindsDB: the KB's id_column, else `id`
            if await self.sources.has_column(query, track):
                partition = {"batch_size": AUTOBATCH_SIZE, "track_column": track}
        given = InsertInput(query=query, options=options or None, partition=partition)
        statement = insert.to_string()
        if partition is not None:
            job = await self.ingest.submit(project, name, given, wait=False, sql=statement, sql_database=db)
            return record_answer(job)
        job = await self.ingest.submit(project, name, given, wait=True, sql=statement, sql_database=db)
        return _result("ok", affected_rows=int(job.counts.get("documents", 0) or 0))

    async def _qualify(self, select: ast.Select, db: str) -> None:
        """A bare table read in a database's context (`USE files`): name its database for the insert."""
        table = select.from_table
        if isinstance(table, ast.Identifier) and len(table.parts) == 1 and not await self._is_project(db):
            select.from_table = ast.Identifier(parts=[db, *table.parts], alias=table.alias)

    async def _insert_values(self, insert: ast.Insert, project: str, name: str) -> Result:
        columns = [c.name if hasattr(c, "name") else str(c.parts[-1]) for c in insert.columns or []]
        if not columns:
            raise BadRequest("INSERT ... VALUES needs a column list: INSERT INTO kb (id, content) VALUES ...")
        rows = []
        for values in insert.values or []:
            row = [v.value if isinstance(v, ast.Constant) else None for v in values]
            rows.append(dict(zip(columns, row, strict=False)))
        stats = await self.ingest.insert(project, name, InsertInput(rows=rows))
        return _result("ok", affected_rows=stats.documents)

    # --- DROP TABLE files.<name> ------------------------------------------------------------------------------
    async def drop_tables(self, drop: ast.DropTables, db: str) -> Result:
        for table in drop.tables:
            database, name = two_part(table, db)
            if database.lower() != FILES:
                hint = (
                    "use DROP KNOWLEDGE_BASE or DROP AGENT"
                    if await self._is_project(database)
                    else "agentkb reads data sources and never changes them"
                )
                raise BadRequest(
                    f"DROP TABLE deletes uploaded files only (DROP TABLE files.<name>); for {database}.{name}: "
                    f"{hint}",
                    title="Unsupported statement",
                )
            if await self.files.find(name.lower()) is None:
                if drop.if_exists:
                    continue
                raise BadRequest(f"Can't delete table '{name}': File '{name}' does not exists")
            await self.files.delete(name.lower())
        return _result("ok", affected_rows=0)

    # --- USE --------------------------------------------------------------------------------------------------
    async def use(self, use: ast.Use) -> Result:
        """`USE <project>`, `USE files` or `USE <data source>` (MindsDB: any database that exists)."""
        name = str(use.value.parts[-1])
        if name.lower() == FILES:
            return _result("ok", db=FILES)
        if name.lower() == "information_schema":
            raise BadRequest(
                "USE information_schema is not supported: name its tables, SELECT * FROM information_schema.<table>",
                title="Unsupported statement",
            )
        if await self._is_project(name):
            return _result("ok", db=name.lower())
        try:
            source = await self.data_sources.get(name)
        except NotFound:
            raise BadRequest(f"Database {name} does not exists", title="Database not found") from None
        return _result("ok", db=source.name)
