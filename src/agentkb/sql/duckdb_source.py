"""DuckDB files as data sources (MindsDB's `duckdb` engine: `database` is the file, `read_only` a flag).

The file must be under the data-source directory (`DataSourcePolicy.database_file`), and it is opened
read-only with the SQL sandbox's DuckDB configuration: external access off (no file readers such as
`read_csv`/`read_text`, no `httpfs`, no `ATTACH`, `COPY`, `INSTALL` or `LOAD`), extensions neither
installed nor auto-loaded, and the configuration locked so no `SET` or `PRAGMA` undoes it. A view or macro
stored in the file that reads a file is refused by DuckDB itself when it runs. MotherDuck (`md:` databases,
`motherduck_token`) needs the network and extensions: refused. `read_only: false` is accepted and ignored —
agentkb only reads data sources.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.dialects import registry
from sqlalchemy.engine import URL

from agentkb.destinations import DataSourcePolicy
from agentkb.sql import sandbox
from agentkb.sql.source_params import ConnectionSpec, Destinations, flag, invalid, refuse_present, required

registry.register("agentkb_duckdb", "agentkb.sql.duckdb_dialect", "DuckDBDialect")

_NETWORK = ("md:", "motherduck:", "s3://", "gcs://", "gs://", "az://", "abfss://", "http://", "https://")


def destinations(params: Mapping[str, Any]) -> Destinations:
    database = params.get("database")
    return Destinations(files=(database,) if isinstance(database, str) and database else ())


def connection_spec(params: Mapping[str, Any], policy: DataSourcePolicy) -> ConnectionSpec:
    refuse_present(params, ("motherduck_token",), "MotherDuck needs DuckDB's network access, which is off")
    database = required(params, "database")
    flag(params, "read_only")  # checked as MindsDB's flag; the file is opened read-only whatever it says
    if database == ":memory:":
        raise invalid(
            "parameter 'database' must be a DuckDB file: an in-memory database holds nothing to read"
        )
    if database.lower().startswith(_NETWORK):
        raise invalid(
            f"parameter 'database' must be a file under the data-source directory; got {database!r}"
        )
    path = policy.database_file(database)
    config = dict(sandbox.DUCKDB_CONFIG)  # lock_configuration stays last
    return ConnectionSpec(URL.create("agentkb_duckdb", database=path), {"read_only": True, "config": config})
