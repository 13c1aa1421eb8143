"""MindsDB's SQL for loading knowledge bases: `INSERT INTO <kb> SELECT ... [USING ...]` (from a data source or
an uploaded file, `files.<name>`), `INSERT INTO <kb> (...) VALUES ...`, `DROP TABLE files.<name>` and
`USE <database>`, each a handler of the statement table (`service.statement_handlers`).

`INSERT ... SELECT` options (MindsDB's `USING`):
- `kb_no_upsert = true`: a first load, nothing read back; `kb_skip_existing = true`: documents whose id is stored
  already are left as they are (not embedded);
- `mirror = true`: once the whole SELECT is written, the documents it did not return are deleted, in the same
  transaction (`ingest.mirror`); not with `batch_size` (nor autobatched), LIMIT / OFFSET or `LAST`;
- `batch_size = n` [, `track_column = c`] [, `error = 'skip'`] [, `threads = n`, accepted and ignored]: a
  partitioned insert, run in the background (the ingest service's partitioned runs); the statement answers with the
  query's record (`ID`, ...), followed in `information_schema.queries`.
With the `autobatch_inserts` setting, an insert whose source has the KB's id column is partitioned the same way
(MindsDB's autobatch: 1000 rows, tracked by that column).
"""

from __future__ import annotations

import copy
from typing import Any

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest, NotFound
from agentkb.ingest.request import InsertInput
from agentkb.service.ingest.query_sources import FILES
from agentkb.service.sql.context import SQLContext
from agentkb.service.sql.queries import record_answer
from agentkb.service.sql.result import Result, ok
from agentkb.sql.names import two_part

KB_OPTIONS = ("kb_no_upsert", "kb_skip_existing")
MIRROR = "mirror"
PARTITION_OPTIONS = ("batch_size", "track_column", "error", "threads")
AUTOBATCH_SIZE = 1000  # MindsDB's default_batch_size


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
    """(kb options and `mirror`, partition) from an INSERT ... SELECT's USING clause; the partition is None
    without `batch_size` (as MindsDB, which partitions only then)."""
    given = {str(k).lower(): _plain(v) for k, v in using.items()}
    unknown = sorted(set(given) - {*KB_OPTIONS, *PARTITION_OPTIONS, MIRROR})
    if unknown:
        raise BadRequest(
            f"Unknown insert option(s) {', '.join(unknown)}; INSERT INTO <kb> SELECT ... USING takes "
            f"{', '.join((*KB_OPTIONS, MIRROR, *PARTITION_OPTIONS))}",
            title="Invalid insert option",
        )
    options = {k: _flag(given[k], k) for k in (*KB_OPTIONS, MIRROR) if k in given}
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


# --- INSERT -----------------------------------------------------------------------------------------------
async def insert(ctx: SQLContext, insert: ast.Insert, db: str, params: Any) -> Result:
    project, name = two_part(insert.table, db)
    try:
        kb = await ctx.knowledge_bases.get(project, name)
    except NotFound:
        raise BadRequest(
            f"INSERT is supported into knowledge bases only; {project}.{name} is not one"
        ) from None
    if insert.from_select is None:
        return await _insert_values(ctx, insert, project, name)
    select = copy.deepcopy(insert.from_select)
    options, partition = insert_options(getattr(select, "using", None) or {})
    mirror = options.pop(MIRROR, False)
    if isinstance(select, ast.Select):
        select.using = None
        await _qualify(ctx, select, db)
    query = select.to_string()
    if partition is None and ctx.autobatch and isinstance(select, ast.Select) and not mirror:
        track = kb.id_column or "id"  # MindsDB: the KB's id_column, else `id`
        if await ctx.sources.has_column(query, track):
            partition = {"batch_size": AUTOBATCH_SIZE, "track_column": track}
    given = InsertInput(query=query, options=options or None, partition=partition, mirror=mirror or None)
    statement = insert.to_string()
    if partition is not None:
        job = await ctx.ingest.submit(project, name, given, wait=False, sql=statement, sql_database=db)
        return record_answer(job)
    job = await ctx.ingest.submit(project, name, given, wait=True, sql=statement, sql_database=db)
    return ok(affected_rows=int(job.counts.get("documents", 0) or 0))


async def _qualify(ctx: SQLContext, select: ast.Select, db: str) -> None:
    """A bare table read in a database's context (`USE files`): name its database for the insert."""
    table = select.from_table
    if isinstance(table, ast.Identifier) and len(table.parts) == 1 and not await ctx.is_project(db):
        select.from_table = ast.Identifier(parts=[db, *table.parts], alias=table.alias)


async def _insert_values(ctx: SQLContext, insert: ast.Insert, project: str, name: str) -> Result:
    columns = [c.name if hasattr(c, "name") else str(c.parts[-1]) for c in insert.columns or []]
    if not columns:
        raise BadRequest("INSERT ... VALUES needs a column list: INSERT INTO kb (id, content) VALUES ...")
    rows = []
    for values in insert.values or []:
        row = [v.value if isinstance(v, ast.Constant) else None for v in values]
        rows.append(dict(zip(columns, row, strict=False)))
    stats = await ctx.ingest.insert(project, name, InsertInput(rows=rows))
    return ok(affected_rows=stats.documents)


# --- DROP TABLE files.<name> ----------------------------------------------------------------------------
async def drop_tables(ctx: SQLContext, drop: ast.DropTables, db: str, params: Any) -> Result:
    for table in drop.tables:
        database, name = two_part(table, db)
        if database.lower() != FILES:
            hint = (
                "use DROP KNOWLEDGE_BASE or DROP AGENT"
                if await ctx.is_project(database)
                else "agentkb reads data sources and never changes them"
            )
            raise BadRequest(
                f"DROP TABLE deletes uploaded files only (DROP TABLE files.<name>); for {database}.{name}: "
                f"{hint}",
                title="Unsupported statement",
            )
        if await ctx.files.find(name.lower()) is None:
            if drop.if_exists:
                continue
            raise BadRequest(f"Can't delete table '{name}': File '{name}' does not exists")
        await ctx.files.delete(name.lower())
    return ok(affected_rows=0)


# --- USE ------------------------------------------------------------------------------------------------
async def use(ctx: SQLContext, use: ast.Use, db: str, params: Any) -> Result:
    """`USE <project>`, `USE files` or `USE <data source>` (MindsDB: any database that exists)."""
    name = str(use.value.parts[-1])
    if name.lower() == FILES:
        return ok(db=FILES)
    if name.lower() == "information_schema":
        raise BadRequest(
            "USE information_schema is not supported: name its tables, SELECT * FROM information_schema.<table>",
            title="Unsupported statement",
        )
    if await ctx.is_project(name):
        return ok(db=name.lower())
    try:
        source = await ctx.data_sources.get(name)
    except NotFound:
        raise BadRequest(f"Database {name} does not exists", title="Database not found") from None
    return ok(db=source.name)
