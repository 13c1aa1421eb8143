"""Read-only SELECT pushdown: validate a MindsDB-style query over ONE data source, render it for that source's
dialect, and stream its rows in batches.

`parse_select` is pure (no I/O). The query executes as rendered from the validated AST, never as the text sent,
and `stream_rows` runs it inside a READ ONLY transaction with a statement timeout as a second line of defence.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from agentkb.errors import BadRequest
from agentkb.sql import sandbox
from agentkb.sql.engines import DIALECTS
from agentkb.validation import is_identifier

if TYPE_CHECKING:  # sqlglot: imported by the first query that needs it, not at start-up (a large import)
    from sqlglot import exp

# sqlglot rather than mindsdb_sql_parser: one AST both validates and transpiles to postgres/mysql/sqlite.
# MindsDB's SQL is MySQL-flavoured (backticks, "strings"), so MySQL is tried first, then PostgreSQL (`::`, E'').
_READ_DIALECTS = ("mysql", "postgres")
_TARGETS = {name: name for name in DIALECTS} | {"postgresql": "postgres", "mariadb": "mysql"}

# Names that are never data sources (MindsDB's system databases).
RESERVED_NAMES = frozenset({"information_schema", "log", "files", "agentkb_pgvector"})  # + KBs' vector store


@functools.cache
def _forbidden_nodes() -> tuple[type, ...]:
    """Statement nodes refused anywhere in the tree (e.g. a DELETE inside a WITH); looked up by name because
    sqlglot versions differ in which of them exist."""
    from sqlglot import exp

    return tuple(getattr(exp, name) for name in (
        "DML", "DDL", "Drop", "Alter", "TruncateTable", "Command", "Copy", "Set", "Pragma", "Transaction",
        "Commit", "Rollback", "Use", "Grant", "Revoke", "Describe", "Kill", "Cache", "Uncache", "Refresh",
        "LoadData", "Show", "Analyze", "Summarize",
    ) if hasattr(exp, name))  # fmt: skip


_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _refuse(detail: str) -> BadRequest:
    return BadRequest(detail, title="Query not allowed")


def _statement(node: Any) -> str:  # an exp.Expression (or a statement mixin such as exp.DML)
    from sqlglot import exp

    if isinstance(node, exp.Command):
        return str(node.this).upper()
    key = str(node.key)
    return {"truncatetable": "TRUNCATE", "anonymous": "a function call"}.get(key, key.upper())


def _parse_as(sql: str, dialect: str) -> list[exp.Expression]:
    import sqlglot

    trees: list[Any] = sqlglot.parse(sql, read=dialect)
    return [tree for tree in trees if tree is not None]


def _parse(sql: str) -> list[exp.Expression]:
    from sqlglot.errors import SqlglotError

    error: Exception | None = None
    for dialect in _READ_DIALECTS:
        try:
            return _parse_as(sql, dialect)
        except (SqlglotError, RecursionError) as exc:
            error = error or exc
    first_line = str(error).splitlines()[0] if error else "unparseable"
    raise BadRequest(f"The query cannot be parsed: {first_line}", title="Invalid SQL")


def _check_functions(tree: exp.Expression) -> None:
    """The sandbox's fence: no denied function (files, programs, connections, settings, sleeping, locking),
    and no function in FROM."""
    sandbox.check_tree(tree)


def _check_nodes(tree: exp.Expression) -> None:
    from sqlglot import exp

    for node in tree.walk():
        if isinstance(node, _forbidden_nodes()):
            raise _refuse(f"Only read-only SELECT queries are allowed; found {_statement(node)}")
        if isinstance(node, exp.Into):
            raise _refuse("SELECT ... INTO is not allowed; only read-only SELECT queries are")
        if isinstance(node, exp.Lock):
            raise _refuse("Locking clauses (FOR UPDATE / FOR SHARE / LOCK IN SHARE MODE) are not allowed")


def _check_lexemes(tree: exp.Expression) -> None:
    """Refuse words the target database could lex differently from sqlglot (e.g. PostgreSQL reads `$q$` as
    the start of a dollar-quoted string), and variables/placeholders, which pushdown never binds."""
    from sqlglot import exp

    for node in tree.find_all(exp.Parameter, exp.Placeholder):
        raise _refuse(f"Variables and placeholders ({node.sql()}) are not allowed in a pushed-down query")
    for node in tree.find_all(exp.Var, exp.Anonymous):
        if not _PLAIN.match(node.name) and not (isinstance(node, exp.Var) and node.name.isalnum()):
            raise _refuse(f"The word {node.name!r} is not allowed in a pushed-down query")


def _datasource_of(tables: list[exp.Table], cte_names: set[str], allow: frozenset[str]) -> str:
    from sqlglot import exp

    sources: set[str] = set()
    for table in tables:
        if not isinstance(table.this, exp.Identifier):
            if isinstance(table.this, exp.Dot):
                raise _refuse(
                    f"Table name {table.sql()} has too many parts; use <datasource>.[<schema>.]<table>"
                )
            continue  # not reached: the sandbox refuses a function in FROM
        parts = [p.name for p in table.parts]
        if len(parts) == 1:
            if parts[0].lower() in cte_names:
                continue
            raise _refuse(f"Table {parts[0]!r} has no data-source prefix; write <datasource>.{parts[0]}")
        source = parts[0].lower()
        if source in RESERVED_NAMES - allow:
            raise _refuse(f"{parts[0]} is a system database, not a data source")
        if not is_identifier(source):
            raise _refuse(f"{parts[0]!r} is not a valid data-source name")
        sources.add(source)
    if not sources:
        raise _refuse("The query reads no table; name one as <datasource>.<table>")
    if len(sources) > 1:
        raise _refuse(f"A query may read from one data source only; it names {', '.join(sorted(sources))}")
    return sources.pop()


def _strip_prefix(tree: exp.Expression, datasource: str) -> None:
    """Drop `<datasource>.` from every table (`ds.t`, `ds.s.t`) and column (`ds.t.c`, `ds.s.t.c`) reference,
    and quote every identifier that is not a plain word, so no dialect can lex it as anything else."""
    from sqlglot import exp

    for ident in tree.find_all(exp.Identifier):
        if not ident.quoted and not _PLAIN.match(ident.name):
            ident.set("quoted", True)
    for node in tree.find_all(exp.Table, exp.Column):
        arg = "catalog" if node.args.get("catalog") is not None else "db"
        prefix = node.args.get(arg)
        if isinstance(prefix, exp.Identifier) and prefix.name.lower() == datasource:
            node.set(arg, None)


@dataclass(frozen=True, slots=True)
class PushdownQuery:
    """A validated read-only SELECT over `datasource`; `render` gives it in the source's own dialect."""

    datasource: str
    tree: exp.Expression = field(repr=False)

    def schemas(self) -> set[str]:
        """The schemas its tables name (`schema.table`, once the data source's own prefix is stripped)."""
        from sqlglot import exp

        return {
            table.args["db"].name
            for table in self.tree.find_all(exp.Table)
            if isinstance(table.args.get("db"), exp.Identifier)
        }

    def render(self, dialect: str) -> str:
        from sqlglot import exp
        from sqlglot.errors import ErrorLevel, SqlglotError

        target = _TARGETS.get(dialect.lower())
        if target is None:
            raise ValueError(f"unknown target dialect {dialect!r}")
        try:  # strict: never silently drop a clause the target cannot express
            sql = self.tree.sql(dialect=target, comments=False, unsupported_level=ErrorLevel.RAISE)
        except (SqlglotError, RecursionError) as exc:
            raise BadRequest(
                f"The query cannot be expressed in {target}: {exc}", title="Invalid SQL"
            ) from None
        # Defence in depth: read the output back as the target dialect and check it again, so a lexing
        # difference between dialects cannot smuggle in a statement or a denied function.
        try:
            trees = _parse_as(sql, target)
        except (SqlglotError, RecursionError):
            raise _refuse(f"The query cannot be rendered safely for {target}") from None
        if len(trees) != 1 or not isinstance(trees[0], exp.Select | exp.SetOperation):
            raise _refuse(f"The query cannot be rendered safely for {target}")
        _check_nodes(trees[0])
        _check_functions(trees[0])
        return sql


def parse_select(sql: str, *, allow: frozenset[str] = frozenset()) -> PushdownQuery:
    """Validate `sql` as one read-only SELECT over one data source; 400 "Query not allowed" otherwise.
    `allow` names system databases the caller serves itself (the agents' `files`)."""
    from sqlglot import exp

    if not isinstance(sql, str) or not sql.strip():
        raise BadRequest("The query is empty", title="Invalid SQL")
    trees = _parse(sql)
    if len(trees) != 1:
        raise _refuse(f"Exactly one statement is allowed; got {len(trees)}")
    tree = trees[0]
    while isinstance(tree, exp.Subquery) and not tree.alias:
        tree = tree.this
    if not isinstance(tree, exp.Select | exp.SetOperation):
        raise _refuse(f"Only SELECT queries are allowed; got {_statement(tree)}")
    _check_nodes(tree)
    _check_functions(tree)
    _check_lexemes(tree)
    cte_names = {cte.alias.lower() for cte in tree.find_all(exp.CTE)}
    datasource = _datasource_of(list(tree.find_all(exp.Table)), cte_names, allow)
    _strip_prefix(tree, datasource)
    return PushdownQuery(datasource, tree)


# --- execution -----------------------------------------------------------------------------------------


def _begin_read_only(conn: Connection, timeout_s: float) -> None:
    """Open a READ ONLY transaction with a statement timeout, in the connection's own dialect, where the
    database has them (the query is one validated SELECT either way)."""
    run = conn.exec_driver_sql
    name = conn.dialect.name
    raw: Any = conn.connection.driver_connection
    if name == "postgresql" and conn.get_execution_options().get("agentkb_dialect") == "redshift":
        run(f"SET statement_timeout TO {int(timeout_s * 1000)}")  # sqlglot's Redshift escapes backslashes
    elif name == "postgresql":
        run("SET TRANSACTION READ ONLY")  # autobegin has opened the transaction
        run(f"SET LOCAL statement_timeout = {int(timeout_s * 1000)}")
        run("SET LOCAL standard_conforming_strings = on")  # the renderer assumes it for backslashes
    elif name in ("mysql", "mariadb"):
        if getattr(conn.dialect, "is_mariadb", False):
            run(f"SET SESSION max_statement_time = {float(timeout_s)}")  # MariaDB: seconds
        else:
            run(f"SET SESSION max_execution_time = {int(timeout_s * 1000)}")  # MySQL: milliseconds
        run("START TRANSACTION READ ONLY")
    elif name == "sqlite":
        run("PRAGMA query_only = ON")
        deadline = time.monotonic() + timeout_s
        raw.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    elif name == "oracle":
        raw.call_timeout = int(timeout_s * 1000)
        run("SET TRANSACTION READ ONLY")
    elif name == "snowflake":
        run(f"ALTER SESSION SET STATEMENT_TIMEOUT_IN_SECONDS = {int(timeout_s)}")
    elif name == "duckdb":  # no statement timeout in DuckDB: interrupt the query at the deadline
        timer = threading.Timer(timeout_s, raw.interrupt)
        timer.daemon = True
        conn.info["agentkb_timer"] = timer
        timer.start()


def _end(conn: Connection) -> None:
    timer = conn.info.pop("agentkb_timer", None) if not conn.invalidated else None
    if timer is not None:
        timer.cancel()
    if conn.dialect.name == "sqlite" and not conn.invalidated:
        raw: Any = conn.connection.driver_connection
        raw.set_progress_handler(None, 0)


def _abandon(conn: Connection) -> None:
    """Give up a stream early. A MySQL streaming result would be drained row by row on close, so drop that
    connection instead (the pool reconnects); elsewhere closing the cursor and rolling back is cheap."""
    if conn.dialect.name not in ("mysql", "mariadb"):
        _end(conn)
        return
    pending = getattr(conn.connection.driver_connection, "_result", None)  # PyMySQL's unbuffered result
    if pending is not None and getattr(pending, "unbuffered_active", False):
        pending.unbuffered_active = False  # or its __del__ tries to drain a closed socket
    conn.invalidate()


# Drivers whose errors SQLAlchemy does not wrap as DBAPIError (their exceptions are not DB-API's Error).
_DRIVER_PACKAGES = frozenset(
    {"clickhouse_sqlalchemy", "clickhouse_driver", "databricks", "snowflake", "google"}
)


def is_database_error(exc: BaseException) -> bool:
    """Whether `exc` is the database's answer (a query error, a timeout), not a fault of agentkb's."""
    return isinstance(exc, DBAPIError) or type(exc).__module__.split(".", 1)[0] in _DRIVER_PACKAGES


def stream_rows(
    engine: Engine, sql: str, batch_size: int = 1000, *, timeout_s: float = 300.0
) -> Generator[tuple[list[str], list[dict[str, Any]]], None, None]:
    """Run a rendered SELECT and yield `(columns, rows)` batches of at most `batch_size` rows.

    A server-side cursor keeps at most one batch in memory. An empty result yields one empty batch, so the
    caller still learns the columns. Closing the generator early never drains the rest of the result.
    Database errors (including the timeout) become 400 "Query error". Blocking: run it in a thread.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    options: dict[str, Any] = {"no_parameters": True}  # '%' in the SQL is literal, never a placeholder
    finished = False
    with engine.connect() as conn:
        try:
            _begin_read_only(conn, timeout_s)
            result = conn.exec_driver_sql(
                sql, execution_options={**options, "stream_results": True, "max_row_buffer": batch_size}
            )
            columns = list(result.keys())
            yielded = False
            while rows := result.fetchmany(batch_size):
                yielded = True
                yield columns, [dict(zip(columns, row, strict=True)) for row in rows]
            if not yielded:
                yield columns, []
            result.close()
            _end(conn)
            conn.rollback()
            finished = True
        except Exception as exc:
            if not is_database_error(exc):
                raise
            orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
            message = " ".join(str(orig).split("Stack trace:", 1)[0].split())  # ClickHouse's server trace
            raise BadRequest(message[:1000], title="Query error") from None
        finally:
            if not finished:
                _abandon(conn)


def native_select(sql: str, dialect: str) -> str:
    """A native query (`SELECT … FROM <datasource> (<its own SQL>)`): validated as one read-only SELECT in the
    source's own dialect, and rendered back from that validated AST."""
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    target = _TARGETS.get(dialect.lower())
    if target is None:
        raise ValueError(f"unknown target dialect {dialect!r}")
    if not isinstance(sql, str) or not sql.strip():
        raise BadRequest("The native query is empty", title="Invalid SQL")
    try:
        trees = _parse_as(sql, target)
    except (SqlglotError, RecursionError) as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else "unparseable"
        raise BadRequest(f"The native query cannot be parsed: {first_line}", title="Invalid SQL") from None
    if len(trees) != 1:
        raise _refuse(f"Exactly one statement is allowed; got {len(trees)}")
    tree = trees[0]
    if not isinstance(tree, exp.Select | exp.SetOperation):
        raise _refuse(f"Only SELECT queries are allowed; got {_statement(tree)}")
    _check_nodes(tree)
    _check_functions(tree)
    _check_lexemes(tree)
    return PushdownQuery("", tree).render(target)
