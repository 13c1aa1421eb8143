"""The SQL sandbox: the functions no user SQL may call, on any engine, and the engines it runs on, locked down.

Two fences, each enough alone:

1. **By name, before anything runs.** `check_statement` walks MindsDB's parsed statement (every statement of
   `/api/sql/query`), `check_tree` walks sqlglot's (every query pushed down to a data source, every agent's
   and MCP query), and `check_duckdb` walks the DuckDB statement the planner runs. Refused: the functions of
   `DENIED_FUNCTIONS` / `DENIED_PREFIXES` (files, programs, network, SQL given as text, settings, the
   environment, extensions, sleeping and locking, on PostgreSQL, MySQL, SQLite and DuckDB alike), and any
   function in FROM: a FROM clause names tables and subqueries only, so no table function (DuckDB's
   `read_csv`, `glob`, `query_table`, `duckdb_settings`, PostgreSQL's `dblink`, SQLite's `pragma_*`, ...)
   ever runs. A DuckDB statement may read only the tables the planner loaded into it.
2. **The engines.** `duckdb_connect` opens DuckDB with external access off (no file, network or extension
   access, no scans of Python objects by name) and its configuration locked, so no `SET`, `RESET` or
   `PRAGMA` can undo it; `guard_sqlite` takes from a SQLite connection extension loading and attached
   databases, and installs an authorizer that lets it only read.

A refusal is a 400 "Query not allowed" naming the function.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest

if TYPE_CHECKING:  # sqlglot: imported by the first query that needs it, not at start-up (a large import)
    import duckdb
    from sqlglot import exp

# Functions that read or write files, run programs, open connections, run SQL given as text, read settings
# or the environment, load extensions, sleep, lock or signal; on any of the engines user SQL reaches.
DENIED_FUNCTIONS = frozenset({
    # MySQL / MariaDB
    "sleep", "benchmark", "load_file", "get_lock", "release_lock", "release_all_locks", "is_free_lock",
    "is_used_lock", "master_pos_wait", "source_pos_wait", "master_gtid_wait", "wait_for_executed_gtid_set",
    "wait_until_sql_thread_after_gtids", "sys_exec", "sys_eval", "sys_get", "sys_set",
    # PostgreSQL (beside the pg_ prefix)
    "set_config", "current_setting", "nextval", "setval", "txid_current", "inet_server_addr",
    "inet_server_port", "inet_client_addr", "ts_stat", "ts_rewrite", "crosstab", "connectby", "xpath_table",
    "http",
    # SQLite (core, and the shell's file functions)
    "load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "fsdir", "zipfile",
    "sqlar_compress", "sqlar_uncompress",
    # DuckDB
    "getenv", "getvariable", "glob", "query", "query_table", "write_log", "json_execute_serialized_sql",
    "checkpoint", "force_checkpoint", "import_database", "copy_database", "which_secret",
    "load_aws_credentials", "add_parquet_key", "arrow_scan", "pandas_scan", "seq_scan",
})  # fmt: skip
DENIED_PREFIXES = (
    # PostgreSQL: its administration and introspection functions, large objects, dblink, SQL as XML
    "pg_", "lo_", "dblink", "query_to_xml", "cursor_to_xml", "table_to_xml", "schema_to_xml",
    "database_to_xml", "http_",
    # DuckDB: file readers and their metadata, its catalogue and settings, other databases' scanners
    "read_", "sniff_", "parquet_", "duckdb_", "pragma_", "sqlite_", "postgres_", "mysql_", "iceberg_",
    "delta_", "ducklake_", "python_", "register_external", "__internal",
)  # fmt: skip
# Harmless PostgreSQL pg_ functions (types and sizes) that queries use.
ALLOWED_FUNCTIONS = frozenset({"pg_typeof", "pg_column_size", "pg_size_pretty"})


def denied(name: str) -> bool:
    """True for a function no user SQL may call."""
    name = name.lower()
    return name not in ALLOWED_FUNCTIONS and (name in DENIED_FUNCTIONS or name.startswith(DENIED_PREFIXES))


def refused(detail: str) -> BadRequest:
    return BadRequest(detail, title="Query not allowed")


def _not_allowed(name: str) -> BadRequest:
    return refused(f"The function {name}() is not allowed")


def _table_function(name: str) -> BadRequest:
    return refused(f"The table function {name}() is not allowed: FROM may name tables and subqueries only")


# --- sqlglot trees (pushed-down, agents' and MCP queries; the DuckDB statement) ----------------------------


def _names(node: exp.Func) -> set[str]:
    """The names a function node goes by: as written (a function sqlglot does not know), its SQL name and
    its class name (so one written under another dialect's name is caught as well)."""
    from sqlglot import exp

    names = {node.sql_name().lower(), type(node).__name__.lower()}
    if isinstance(node, exp.Anonymous):
        names.add(node.name.lower())
    return names


def _written(node: Any, dialect: str | None) -> str:  # an exp.Func, or whatever else stands in FROM
    """A function's name as `dialect` writes it."""
    from sqlglot import exp

    if isinstance(node, exp.Anonymous):
        return node.name
    text = node.sql(dialect=dialect)
    return (text.split("(", 1)[0] if "(" in text else type(node).__name__).lower()


def check_tree(tree: exp.Expression, dialect: str | None = None) -> None:
    """Refuse a denied function anywhere in `tree` (parsed as `dialect`), and any function in FROM."""
    from sqlglot import exp

    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, (exp.Identifier, exp.Dot)):  # a function (or anything else) as a table
            raise _table_function(_written(table.this, dialect))
    for source in tree.find_all(exp.Unnest, exp.Lateral):
        if isinstance(source.parent, (exp.From, exp.Join)) and not isinstance(source.this, exp.Subquery):
            raise _table_function(
                _written(source if isinstance(source, exp.Unnest) else source.this, dialect)
            )
    for func in tree.find_all(exp.Func):
        if any(denied(name) for name in _names(func)):
            raise _not_allowed(_written(func, dialect))


def check_duckdb(sql: str, tables: Collection[str]) -> None:
    """Refuse a DuckDB statement that is not one SELECT over `tables` (and its own CTEs), or that calls a
    denied function."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        trees = [t for t in sqlglot.parse(sql, read="duckdb") if t is not None]
    except (SqlglotError, RecursionError) as exc:
        raise BadRequest(f"The query cannot be planned: {str(exc).splitlines()[0]}") from None
    if len(trees) != 1 or not isinstance(trees[0], exp.Select | exp.SetOperation):
        raise refused("Only one SELECT statement is allowed")
    tree = trees[0]
    check_tree(tree, "duckdb")
    known = {name.lower() for name in tables} | {cte.alias.lower() for cte in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        qualified = table.args.get("db") is not None or table.args.get("catalog") is not None
        if qualified or table.name.lower() not in known:
            raise refused(f"The table {table.sql(dialect='duckdb')} is not a table of this query")


# --- MindsDB's statements (/api/sql/query) ----------------------------------------------------------------


def statement_nodes(root: ast.ASTNode) -> list[ast.ASTNode]:
    """Every node of a MindsDB statement, subqueries included."""
    out: list[ast.ASTNode] = []
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, (list, tuple)):
            stack.extend(node)
        elif isinstance(node, ast.ASTNode):
            out.append(node)
            stack.extend(vars(node).values())
    return out


def check_statement(statement: ast.ASTNode) -> None:
    """Refuse a statement that calls a denied function, or reads one as a table (`FROM read_csv('...')`,
    which MindsDB's parser reads as a native query to a data source of that name)."""
    for node in statement_nodes(statement):
        if isinstance(node, ast.Function) and denied(str(node.op)):
            raise _not_allowed(str(node.op))
        if isinstance(node, ast.NativeQuery) and isinstance(node.integration, ast.Identifier):
            name = str(node.integration.parts[-1])
            if denied(name):
                raise _table_function(name)


# --- the engines ------------------------------------------------------------------------------------------

DUCKDB_CONFIG: dict[str, Any] = {
    "enable_external_access": False,  # no files, network, extensions, ATTACH, COPY, Python object scans
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
    "lock_configuration": True,  # last: no SET / RESET / PRAGMA may change any of it
}


def duckdb_connect() -> duckdb.DuckDBPyConnection:
    """A private in-memory DuckDB that can reach nothing outside itself (frames registered from Python by
    this process still load). DuckDB is imported by the first connection (a large import)."""
    import duckdb

    return duckdb.connect(":memory:", config=DUCKDB_CONFIG)


_SQLITE_READS = frozenset({
    sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_TRANSACTION, sqlite3.SQLITE_SAVEPOINT,
    sqlite3.SQLITE_RECURSIVE,
})  # fmt: skip
# Pragmas that only read a table's shape (SQLAlchemy's inspection), and read_uncommitted read with no value
# (SQLAlchemy's isolation level); `query_only` may only be turned on.
_SQLITE_PRAGMAS = frozenset({
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list",
})  # fmt: skip
_ON = frozenset({"on", "1", "true", "yes"})
# SQLite runs its GLOB, LIKE, REGEXP and MATCH operators as functions of these names.
_SQLITE_OPERATORS = frozenset({"glob", "like", "regexp", "match"})


def _sqlite_authorizer(
    action: int, arg1: str | None, arg2: str | None, _db: str | None, _via: str | None
) -> int:
    if action in _SQLITE_READS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        allowed = arg2 is not None and (arg2.lower() in _SQLITE_OPERATORS or not denied(arg2))
        return sqlite3.SQLITE_OK if allowed else sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA:
        name, value = (arg1 or "").lower(), (arg2 or "").lower()
        if (
            name in _SQLITE_PRAGMAS
            or (name == "read_uncommitted" and arg2 is None)
            or (name == "query_only" and value in _ON)
        ):
            return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY  # writes, schema changes, ATTACH / DETACH, other pragmas, virtual tables


def guard_sqlite(conn: sqlite3.Connection) -> None:
    """Let `conn` only read: no extension loading, no attached databases, no writes or pragmas that change
    anything, no denied function."""
    if hasattr(conn, "enable_load_extension"):  # absent where Python's sqlite3 is built without it
        conn.enable_load_extension(False)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.set_authorizer(_sqlite_authorizer)
