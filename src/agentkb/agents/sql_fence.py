"""What an agent's SQL may read, and the fence every `sql_db_query` (and `sql_db_schema` sample) passes.

`pushdown.parse_select` already refuses anything but one read-only SELECT over one data source (DDL, DML,
several statements, locking, INTO, variables, and through `sql.sandbox` every denied function and any function
in FROM). The fence adds the agent's allow-list on the parsed tree: every table reference, in joins,
subqueries, set operations and CTE bodies alike, must be one of the agent's tables. A one-part name counts as
a CTE only where that CTE is in scope (its WITH encloses the reference, and inside a sibling CTE only earlier
siblings, or itself under RECURSIVE), so a CTE can never be used to smuggle in a table of the same name. A
reference whose spelling differs from the allowed table's is rewritten to that table's exact quoted name, so
the database can only resolve it to an allowed table. The query then runs as rendered from the checked tree,
through `pushdown.stream_rows` (READ ONLY transaction, statement timeout), in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy
from sqlalchemy import Engine
from sqlalchemy.exc import NoSuchTableError

from agentkb.agents.files_db import DIALECT as FILES_DIALECT
from agentkb.agents.files_db import FILES
from agentkb.agents.ports import DataSourceEngines
from agentkb.errors import BadRequest, NotFound
from agentkb.patterns import glob_match
from agentkb.sql import pushdown

if TYPE_CHECKING:  # sqlglot is imported by the first query that needs it, not at start-up (a large import)
    from sqlglot import exp

log = logging.getLogger(__name__)

_GLOB = re.compile(r"[*?\[]")


def refused(detail: str) -> BadRequest:
    return BadRequest(detail, title="Query not allowed")


@dataclass(frozen=True, slots=True)
class AllowedTable:
    """One table an agent may read; `schema` None means the data source's default schema."""

    datasource: str
    schema: str | None
    table: str

    @property
    def name(self) -> str:
        return ".".join(p for p in (self.datasource, self.schema, self.table) if p is not None)

    def reference(self) -> str:
        """The table as MindsDB-flavoured (MySQL-quoted) SQL, e.g. `` `ds`.`items` ``."""
        return ".".join(
            "`" + p.replace("`", "``") + "`"
            for p in (self.datasource, self.schema, self.table)
            if p is not None
        )


@dataclass(frozen=True, slots=True)
class AllowList:
    tables: tuple[AllowedTable, ...] = ()
    dialects: Mapping[str, str] = field(default_factory=dict)  # data source -> pushdown dialect
    entries: tuple[str, ...] = ()  # the agent's `data.tables` as given (patterns included), for messages

    def not_found(self, name: str) -> BadRequest:
        """MindsDB's refusal (`SQLAgent.check_table_permission`)."""
        return refused(f"Table {name} not found. Available tables: {', '.join(self.entries)}")

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tables]

    def find(self, datasource: str, schema: str | None, table: str) -> AllowedTable | None:
        """The allowed table of that name: spelt exactly, else its one case-insensitive match."""
        fold = schema.casefold() if schema is not None else None
        same = [
            t
            for t in self.tables
            if t.datasource == datasource.lower() and (t.schema.casefold() if t.schema else None) == fold
        ]
        exact = [t for t in same if t.table == table]
        loose = [t for t in same if t.table.casefold() == table.casefold()]
        return exact[0] if exact else loose[0] if len(loose) == 1 else None

    def lookup(self, text: str) -> AllowedTable | None:
        """Resolve a name as an agent writes it: `ds.table`, `ds.schema.table`, or a unique table name."""
        parts = [p.strip().strip('`"[]') for p in text.strip().strip('`"').split(".")]
        if len(parts) == 3:
            return self.find(parts[0], parts[1], parts[2])
        if len(parts) == 2:
            return self.find(parts[0], None, parts[1])
        matches = [t for t in self.tables if t.table.casefold() == parts[0].casefold()]
        return matches[0] if len(matches) == 1 else None


@dataclass(frozen=True, slots=True)
class FencedQuery:
    datasource: str
    sql: str  # rendered in the data source's dialect from the checked tree
    tables: tuple[AllowedTable, ...]  # the allowed tables it reads, in order of first use


@dataclass(frozen=True, slots=True)
class Rows:
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool  # the query had more rows than were read


# --- the fence ------------------------------------------------------------------------------------------


def fence(sql: str, allowed: AllowList) -> FencedQuery:
    """Check `sql` against the agent's tables and render it; `BadRequest` saying why it is refused.

    A refused query whose table names hold back-quoted dots (`` `pg.public`.planets ``, `` `files.f1` ``) is
    tried again with those names split into their parts, as MindsDB does for LLMs that quote badly."""
    try:
        return _fence(sql, allowed)
    except BadRequest:
        split = split_quoted_names(sql)
        if split is None:
            raise
        try:
            return _fence(split, allowed)
        except BadRequest:
            pass
        raise


def split_quoted_names(sql: str) -> str | None:
    """`sql` with each table name part that is quoted and holds dots split into parts; None if there is none."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    for dialect in ("mysql", "postgres"):
        try:
            trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
        except (SqlglotError, RecursionError):
            continue
        changed = False
        for tree in trees:
            for table in tree.find_all(exp.Table):
                parts = [p for p in (table.args.get(k) for k in ("catalog", "db", "this")) if p is not None]
                if not all(isinstance(p, exp.Identifier) for p in parts):
                    continue
                names: list[exp.Identifier] = []
                for part in parts:
                    if part.quoted and "." in part.name:
                        names.extend(exp.to_identifier(n, quoted=True) for n in part.name.split("."))
                    else:
                        names.append(part)
                if len(names) == len(parts) or len(names) > 3:
                    continue
                changed = True
                for key, value in zip(("this", "db", "catalog"), reversed(names), strict=False):
                    table.set(key, value)
        if not changed:
            return None
        return ";".join(tree.sql(dialect=dialect) for tree in trees)
    return None


def _fence(sql: str, allowed: AllowList) -> FencedQuery:
    from sqlglot import exp

    query = pushdown.parse_select(sql, allow=frozenset({FILES}))
    dialect = allowed.dialects.get(query.datasource)
    if dialect is None:
        first = next((t for t in query.tree.find_all(exp.Table) if isinstance(t.this, exp.Identifier)), None)
        rest = [p.name for p in first.parts] if first is not None else []
        raise allowed.not_found(".".join([query.datasource, *rest]))
    _check_extras(query.tree)
    used: list[AllowedTable] = []
    for table in query.tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            continue  # not reached: the sandbox (through pushdown) refuses a function in FROM
        if table.args.get("catalog") is not None:
            raise refused(f"Table name {table.sql()} has too many parts")
        schema = table.args.get("db")
        name = _effective(table.this, dialect)
        if schema is None and name in _ctes_in_scope(table, dialect):
            continue
        schema_name = _effective(schema, dialect) if isinstance(schema, exp.Identifier) else None
        entry = allowed.find(query.datasource, schema_name, name)
        if entry is None:
            raise allowed.not_found(
                ".".join(p for p in (query.datasource, schema_name, name) if p is not None)
            )
        _pin(table, entry, dialect)
        if entry not in used:
            used.append(entry)
    return FencedQuery(query.datasource, query.render(dialect), tuple(used))


_LOWER_FOLDING = ("postgres", "redshift")
_UPPER_FOLDING = ("oracle", "snowflake")  # SQLAlchemy names their case-insensitive tables in lower case
_PLAIN_NAME = re.compile(r"^[a-z_][a-z0-9_$]*$")


def _effective(ident: exp.Identifier, dialect: str) -> str:
    """The name the database resolves, as SQLAlchemy's inspection spells it: PostgreSQL folds unquoted
    identifiers to lower case; Oracle and Snowflake to upper case, which SQLAlchemy shows in lower case."""
    if dialect in _LOWER_FOLDING and not ident.quoted:
        return ident.name.lower()
    if dialect in _UPPER_FOLDING and (not ident.quoted or ident.name == ident.name.upper()):
        return ident.name.lower() if _PLAIN_NAME.match(ident.name.lower()) else ident.name
    return ident.name


def _spelt(name: str, dialect: str) -> exp.Identifier:
    """An identifier the database resolves to the table SQLAlchemy calls `name`."""
    from sqlglot import exp

    plain = dialect in _UPPER_FOLDING and _PLAIN_NAME.match(name) is not None  # stored in upper case
    return exp.to_identifier(name, quoted=not plain)


def _pin(table: exp.Table, entry: AllowedTable, dialect: str) -> None:
    """Spell the reference as the allowed table, aliased as written so column qualifiers still match."""
    from sqlglot import exp

    if _effective(table.this, dialect) != entry.table:
        if table.args.get("alias") is None:
            table.set("alias", exp.TableAlias(this=table.this.copy()))
        table.set("this", _spelt(entry.table, dialect))
    schema = table.args.get("db")
    if (
        isinstance(schema, exp.Identifier)
        and entry.schema is not None
        and _effective(schema, dialect) != entry.schema
    ):
        table.set("db", _spelt(entry.schema, dialect))


def _cte_names(ctes: Iterable[exp.Expression], dialect: str) -> set[str]:
    from sqlglot import exp

    names: set[str] = set()
    for cte in ctes:
        alias = cte.args.get("alias")
        ident = alias.this if isinstance(alias, exp.TableAlias) else None
        if isinstance(ident, exp.Identifier):
            names.add(_effective(ident, dialect))
    return names


def _ctes_in_scope(node: exp.Expression, dialect: str) -> set[str]:
    """CTE names a one-part table name at `node` resolves to, by SQL's scoping rules (a subset where the
    dialects differ: a name left out is checked as a table, which is the safe side)."""
    from sqlglot import exp

    names: set[str] = set()
    child: Any = node
    parent: Any = node.parent
    while parent is not None:
        if isinstance(parent, exp.With):
            ctes = list(parent.expressions)
            index = next((i for i, cte in enumerate(ctes) if cte is child), 0)
            names |= _cte_names(ctes[: index + 1] if parent.args.get("recursive") else ctes[:index], dialect)
        else:
            with_ = parent.args.get("with_", parent.args.get("with"))
            if isinstance(with_, exp.With) and with_ is not child:
                names |= _cte_names(with_.expressions, dialect)
        child, parent = parent, parent.parent
    return names


def _check_extras(tree: exp.Expression) -> None:
    from sqlglot import exp

    for session in tree.find_all(exp.SessionParameter):
        raise refused(f"Server variables ({session.sql()}) are not allowed")
    for dot in tree.find_all(exp.Dot):
        if isinstance(dot.expression, exp.Func):
            raise refused(f"Schema-qualified function calls ({dot.sql()}) are not allowed")


# --- running ---------------------------------------------------------------------------------------------


def fetch(engine: Engine, sql: str, row_cap: int, timeout_s: float) -> Rows:
    """Run a fenced query read-only; stop after `row_cap` rows. Blocking: run it in a thread."""
    stream = pushdown.stream_rows(engine, sql, min(row_cap + 1, 1000), timeout_s=timeout_s)
    columns: list[str] = []
    rows: list[list[Any]] = []
    try:
        for columns, batch in stream:
            rows.extend([row[c] for c in columns] for row in batch)
            if len(rows) > row_cap:
                break
    finally:
        stream.close()  # abandons an unfinished result without draining it
    return Rows(columns, rows[:row_cap], len(rows) > row_cap)


def table_columns(engine: Engine, table: AllowedTable) -> list[tuple[str, str]]:
    """(column, SQL type) pairs by SQLAlchemy inspection. Blocking: run it in a thread."""
    try:
        columns = sqlalchemy.inspect(engine).get_columns(table.table, table.schema)
    except NoSuchTableError:
        raise NotFound(f"Table {table.name} does not exist") from None
    return [(str(c["name"]), _type_name(c["type"])) for c in columns]


def _type_name(sql_type: Any) -> str:
    try:
        return str(sql_type)
    except Exception:  # noqa: BLE001 - some dialect types cannot render without a dialect
        return type(sql_type).__name__.upper()


def _list_tables(engine: Engine, schemas: set[str | None]) -> dict[str | None, list[str]]:
    inspector = sqlalchemy.inspect(engine)
    listed: dict[str | None, list[str]] = {}
    for schema in schemas:
        names = inspector.get_table_names(schema) + inspector.get_view_names(schema)
        listed[schema] = sorted(set(names))
    return listed


def _canonical(table: str, names: Sequence[str] | None) -> str:
    """The real spelling of `table` (exact, else its one case-insensitive match); as written otherwise."""
    if not names or table in names:
        return table
    matches = [n for n in names if n.casefold() == table.casefold()]
    return matches[0] if len(matches) == 1 else table


async def resolve_tables(
    entries: Sequence[str], data_sources: DataSourceEngines, files: Sequence[str] | None = None
) -> AllowList:
    """Expand patterns (`<ds>.*`, `<ds>.<schema>.*`, `files.show*`: globs as fnmatch reads them, case-insensitive, on RE2) by
    inspection, and spell named tables as the database does. `files` lists the uploaded table files (the
    `files` data source; None: it is not offered).

    Entries of a data source that does not exist are dropped; if a source cannot be inspected, its named
    tables are kept as written (queries will report the connection error) and its patterns give nothing.
    """
    wanted: dict[str, list[tuple[str | None, str]]] = {}
    for entry in entries:
        parts = entry.split(".")
        if len(parts) not in (2, 3):
            continue
        schema = parts[1] if len(parts) == 3 else None
        wanted.setdefault(parts[0].lower(), []).append((schema, parts[-1]))
    tables: list[AllowedTable] = []
    dialects: dict[str, str] = {}
    for datasource, refs in wanted.items():
        listed: dict[str | None, list[str]] = {}
        if datasource == FILES and files is not None:
            dialects[datasource], listed = FILES_DIALECT, {None: list(files)}
        else:
            try:
                engine, dialects[datasource] = await data_sources.engine_for(datasource)
            except NotFound:
                log.warning("agent table source %s does not exist; its tables are skipped", datasource)
                continue
            try:
                listed = await asyncio.to_thread(_list_tables, engine, {schema for schema, _ in refs})
            except Exception as exc:  # noqa: BLE001 - an unreachable source must not fail the whole run
                log.warning("cannot list the tables of %s: %s", datasource, exc)
        for schema, table in refs:
            names = listed.get(schema)
            if _GLOB.search(table):
                matched = [n for n in names or () if glob_match(n, table)]
                tables.extend(AllowedTable(datasource, schema, name) for name in matched)
            else:
                tables.append(AllowedTable(datasource, schema, _canonical(table, names)))
    return AllowList(tuple(dict.fromkeys(tables)), dialects, tuple(entries))
