"""The data-source engines agentkb serves, under MindsDB's engine names: how each is built, the SQL dialect a
pushed-down query is rendered in, and the package its SQLAlchemy dialect comes from.

Built in: `postgres`/`postgresql`, `timescaledb` and `redshift` (PostgreSQL's protocol, psycopg 3, as
MindsDB's handlers), `mysql`/`mariadb` (PyMySQL), `sqlite` and `duckdb` (files under the data-source
directory). Optional (`pip install 'agentkb[warehouses]'`, or the one package named): `mssql`, `oracle`,
`snowflake`, `bigquery`, `databricks`, `clickhouse`; their dialects are imported only when such a source is
used, and a missing one is a 400 naming the package.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentkb.errors import BadRequest


@dataclass(frozen=True, slots=True)
class EngineKind:
    family: str  # the builder of its connection: "postgres", "mysql", "sqlite", "duckdb", "mssql", ...
    dialect: str  # sqlglot's name for the SQL it speaks (pushdown renders in it)
    module: str | None = None  # what its SQLAlchemy dialect imports; None: always installed
    package: str | None = None  # the package that brings `module`


_POSTGRES = EngineKind("postgres", "postgres")
_MYSQL = EngineKind("mysql", "mysql")
ENGINES: dict[str, EngineKind] = {
    "postgres": _POSTGRES,
    "postgresql": _POSTGRES,
    "timescaledb": _POSTGRES,
    "redshift": EngineKind("postgres", "redshift"),
    "mysql": _MYSQL,
    "mariadb": _MYSQL,
    "sqlite": EngineKind("sqlite", "sqlite"),
    "duckdb": EngineKind("duckdb", "duckdb", "duckdb_engine", "duckdb-engine"),
    "mssql": EngineKind("mssql", "tsql", "pymssql", "pymssql"),
    "oracle": EngineKind("oracle", "oracle", "oracledb", "oracledb"),
    "snowflake": EngineKind("snowflake", "snowflake", "snowflake.sqlalchemy", "snowflake-sqlalchemy"),
    "bigquery": EngineKind("bigquery", "bigquery", "sqlalchemy_bigquery", "sqlalchemy-bigquery"),
    "databricks": EngineKind("databricks", "databricks", "databricks.sqlalchemy", "databricks-sqlalchemy"),
    "clickhouse": EngineKind("clickhouse", "clickhouse", "clickhouse_sqlalchemy", "clickhouse-sqlalchemy"),
}
SUPPORTED_ENGINES = tuple(ENGINES)
DIALECTS = frozenset(kind.dialect for kind in ENGINES.values())


def check_engine(engine: object) -> str:
    """The engine name, lower-cased; 400 listing the supported ones otherwise."""
    if not isinstance(engine, str) or engine.lower() not in ENGINES:
        raise BadRequest(
            f"Unsupported engine {engine!r}; supported engines: {', '.join(SUPPORTED_ENGINES)}",
            title="Invalid engine",
        )
    return engine.lower()


def kind_of(engine: str) -> EngineKind:
    return ENGINES[check_engine(engine)]


def dialect_of(engine: str) -> str:
    """The SQL dialect pushdown renders for an engine (sqlglot's name: `postgres`, `tsql`, `duckdb`, ...)."""
    return kind_of(engine).dialect
