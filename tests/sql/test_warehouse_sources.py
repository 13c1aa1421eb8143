"""The optional engines (`mssql`, `oracle`, `snowflake`, `bigquery`, `databricks`, `clickhouse`) and the
PostgreSQL-protocol ones (`timescaledb`, `redshift`) without their servers: MindsDB's parameters → the
SQLAlchemy URL and driver arguments each connects with, the policy on their hosts and key files, the 400
naming the package when a dialect is missing, and the pushed-down SQL each is sent (LIMIT / TOP / FETCH,
quoting, booleans, string escapes)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from agentkb.agents.sql_fence import AllowedTable, AllowList, fence
from agentkb.destinations import DataSourcePolicy, DestinationRefused
from agentkb.errors import BadRequest
from agentkb.sql import datasources, pushdown, warehouses
from agentkb.sql.engines import ENGINES, dialect_of
from agentkb.sql.source_params import ConnectionSpec
from tests.helpers import assert_problem

POLICY = DataSourcePolicy(file_dir=Path("/srv/sources"))


def spec(engine: str, params: dict[str, Any], policy: DataSourcePolicy = POLICY) -> ConnectionSpec:
    return warehouses.BUILDERS[ENGINES[engine].family](params, policy)


def url(engine: str, params: dict[str, Any]) -> str:
    return spec(engine, params).url.render_as_string(hide_password=False)


# --- MindsDB's parameters → URLs ---------------------------------------------------------------------------


def test_mssql_from_mindsdb_parameters() -> None:
    params = {
        "host": "sql.example.com",
        "port": 1533,
        "user": "sa",
        "password": "p@ss:w/rd",
        "database": "master",
    }
    built = spec("mssql", {**params, "schema": "dbo"})
    assert (
        built.url.render_as_string(hide_password=False)
        == "mssql+pymssql://sa:p%40ss%3Aw%2Frd@sql.example.com:1533/master"
    )
    assert built.server == ("sql.example.com", 1533) and built.pin == "host_port"
    assert built.connect_args["login_timeout"] == 10
    assert url("mssql", {k: v for k, v in params.items() if k != "port"}).endswith(
        "@sql.example.com:1433/master"
    )
    for extra in ({"server": "sql\\inst"}, {"driver": "ODBC Driver 18 for SQL Server"}, {"use_odbc": True}):
        with pytest.raises(BadRequest, match=f"parameter '{next(iter(extra))}' is not supported"):
            spec("mssql", {**params, **extra})


def test_oracle_from_fields_or_an_easy_connect_dsn() -> None:
    base = {"user": "admin", "password": "pw"}
    sid = spec("oracle", {**base, "host": "ora.example.com", "sid": "ORCL"})
    assert (
        sid.url.render_as_string(hide_password=False)
        == "oracle+oracledb://admin:pw@ora.example.com:1521/ORCL"
    )
    assert sid.server == ("ora.example.com", 1521)
    service = url("oracle", {**base, "host": "ora.example.com", "port": 1522, "service_name": "PDB1"})
    assert service == "oracle+oracledb://admin:pw@ora.example.com:1522?service_name=PDB1"
    dsn = spec("oracle", {**base, "dsn": "db.example.com:1600/SALES"})
    assert (
        dsn.url.render_as_string(hide_password=False)
        == "oracle+oracledb://admin:pw@db.example.com:1600?service_name=SALES"
    )
    assert dsn.server == ("db.example.com", 1600)
    assert (
        spec("oracle", {**base, "host": "h", "sid": "S", "disable_oob": True}).connect_args["disable_oob"]
        is True
    )
    for bad, why in (
        ({"dsn": "(DESCRIPTION=(ADDRESS=(HOST=x)(PORT=1)))"}, "Easy Connect"),
        ({"dsn": "scott/tiger@db.example.com:1521/x"}, "Easy Connect"),
        ({"host": "h"}, "'sid' or 'service_name' is required"),
        ({"host": "h", "sid": "S", "thick_mode": True}, "thin mode"),
        ({"host": "h", "sid": "S", "oracle_client_lib_dir": "/opt/oracle"}, "native client library"),
        ({"host": "h", "sid": "S", "auth_mode": "root"}, "'auth_mode' must be one of"),
    ):
        with pytest.raises(BadRequest, match=why):
            spec("oracle", {**base, **bad})


def test_snowflake_password_and_key_pair(tmp_path: Path) -> None:
    base = {"account": "abc-12345.eu-west-1", "user": "u", "database": "SALES", "schema": "PUBLIC"}
    built = spec(
        "snowflake", {**base, "password": "pw", "warehouse": "WH", "role": "ANALYST", "auth_type": "password"}
    )
    assert (
        built.url.render_as_string(hide_password=False)
        == "snowflake://u:pw@abc-12345.eu-west-1/SALES/PUBLIC?role=ANALYST&warehouse=WH"
    )
    assert built.server == ("abc-12345.eu-west-1.snowflakecomputing.com", 443) and built.pin is None
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"phrase"),
    ).decode()
    paired = spec(
        "snowflake", {**base, "auth_type": "key_pair", "private_key": pem, "private_key_passphrase": "phrase"}
    )
    assert paired.connect_args["authenticator"] == "SNOWFLAKE_JWT"
    assert paired.connect_args["private_key"] == key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    assert paired.url.password is None
    in_dir = DataSourcePolicy(file_dir=tmp_path)
    from_file = spec("snowflake", {**base, "auth_type": "key_pair", "private_key_path": "rsa.p8"}, in_dir)
    assert from_file.connect_args["private_key_file"] == str(tmp_path / "rsa.p8")
    for bad, why in (
        (
            {"auth_type": "key_pair", "private_key_path": "/etc/ssh/ssh_host_rsa_key"},
            "outside the data-source",
        ),
        ({"auth_type": "key_pair", "private_key": "not a key"}, "must be a PEM private key"),
        ({"auth_type": "oauth", "password": "pw"}, "'auth_type' must be"),
        ({"account": "evil.com/x?", "password": "pw"}, "Snowflake account identifier"),
        ({"schema": "x; DROP", "password": "pw"}, "plain identifier"),
        ({"schema": None, "password": "pw"}, "'schema' is required"),
    ):
        with pytest.raises(BadRequest, match=why):
            spec("snowflake", {**base, **bad}, in_dir)


def test_bigquery_needs_its_own_credentials(tmp_path: Path) -> None:
    info = {"type": "service_account", "project_id": "tough-future-332513", "client_email": "x@y"}
    built = spec(
        "bigquery", {"project_id": "tough-future-332513", "dataset": "sales", "service_account_json": info}
    )
    assert built.url.render_as_string() == "bigquery://tough-future-332513/sales"
    assert built.engine_args == {"credentials_info": info} and built.server is None
    as_text = spec(
        "bigquery", {"project_id": "p", "dataset": "d", "service_account_json": '{"type": "service_account"}'}
    )
    assert as_text.engine_args == {"credentials_info": {"type": "service_account"}}
    in_dir = DataSourcePolicy(file_dir=tmp_path)
    keyed = spec(
        "bigquery",
        {"project_id": "p", "dataset_project": "q", "dataset": "d", "service_account_keys": "k.json"},
        in_dir,
    )
    assert keyed.url.render_as_string() == "bigquery://q/d"
    assert keyed.engine_args == {"credentials_path": str(tmp_path / "k.json")}
    for bad, why in (
        ({}, "agentkb never lends its own environment's Google credentials"),
        ({"service_account_keys": "/root/.config/gcloud/application_default_credentials.json"}, "outside"),
        ({"service_account_keys": "https://example.com/k.json"}, "under the data-source directory"),
        ({"service_account_json": info, "billing_project": "other"}, "'billing_project' is not supported"),
    ):
        with pytest.raises(BadRequest, match=why):
            spec("bigquery", {"project_id": "p", "dataset": "d", **bad}, in_dir)


def test_databricks_from_mindsdb_parameters() -> None:
    params = {
        "server_hostname": "adb-1234567890123456.7.azuredatabricks.net",
        "http_path": "sql/protocolv1/o/1234567890123456/1234-567890-test123",
        "access_token": "dapi1234567890ab1cde2f3ab456c7d89efa",
        "catalog": "main",
        "schema": "sales",
        "session_configuration": '{"ansi_mode": true}',
    }
    built = spec("databricks", params)
    assert built.url.render_as_string(hide_password=False) == (
        "databricks://token:dapi1234567890ab1cde2f3ab456c7d89efa@adb-1234567890123456.7.azuredatabricks.net"
        "?catalog=main&http_path=sql%2Fprotocolv1%2Fo%2F1234567890123456%2F1234-567890-test123&schema=sales"
    )
    assert built.connect_args == {"session_configuration": {"ansi_mode": "True"}}
    assert built.server == ("adb-1234567890123456.7.azuredatabricks.net", 443)
    with pytest.raises(BadRequest, match="must be a host name"):
        spec("databricks", {**params, "server_hostname": "https://adb.example.net/"})


def test_clickhouse_protocols_and_read_only_setting() -> None:
    base = {"host": "ch.example.com", "user": "default", "password": "pw", "database": "db"}
    native = spec("clickhouse", {**base, "port": 9000})
    assert native.url.render_as_string(hide_password=False) == (
        "clickhouse+native://default:pw@ch.example.com:9000/db?connect_timeout=10&max_execution_time=300&readonly=2"
    )
    assert native.server == ("ch.example.com", 9000)
    https = url("clickhouse", {**base, "protocol": "https", "port": 8443, "verify": False})
    assert https.startswith("clickhouse+http://default:pw@ch.example.com:8443/db?")
    assert "protocol=https" in https and "verify=false" in https and "readonly=2" in https
    assert ":8123/db" in url("clickhouse", {**base, "protocol": "http"})
    with pytest.raises(BadRequest, match="'protocol' must be native, http or https"):
        spec("clickhouse", {**base, "protocol": "grpc"})


def test_postgres_protocol_engines_take_postgres_parameters() -> None:
    params = {"host": "pg.example.com", "user": "u", "password": "pw", "database": "d", "schema": "analytics"}
    timescale = datasources.connection_spec("timescaledb", params, POLICY)
    assert timescale.url.render_as_string() == "postgresql+psycopg://u:***@pg.example.com:5432/d"
    assert timescale.connect_args["options"] == "-c search_path=analytics,public"
    redshift = datasources.connection_spec("redshift", params, POLICY)
    assert redshift.url.port == 5439 and redshift.pin == "hostaddr"
    assert (dialect_of("timescaledb"), dialect_of("redshift")) == ("postgres", "redshift")


# --- the policy on their destinations ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "params"),
    [
        ("mssql", {"host": "169.254.169.254", "user": "u", "database": "d"}),
        ("oracle", {"dsn": "metadata.google.internal:1521/x", "user": "u"}),
        ("oracle", {"host": "/var/run/oracle", "sid": "S", "user": "u"}),
        ("databricks", {"server_hostname": "169.254.170.2", "http_path": "/p", "access_token": "t"}),
        ("clickhouse", {"host": "[fe80::1]", "user": "u", "database": "d"}),
    ],
)
def test_metadata_hosts_and_sockets_are_refused(engine: str, params: dict[str, Any]) -> None:
    with pytest.raises(BadRequest) as refused:
        spec(engine, params)
    assert isinstance(refused.value, DestinationRefused) or "host name or address" in refused.value.detail
    # and before they are stored, where MindsDB stores parameters unchecked
    if isinstance(refused.value, DestinationRefused):
        with pytest.raises(DestinationRefused):
            datasources.check_destination(engine, params, POLICY)


def test_key_files_are_checked_before_they_are_stored() -> None:
    with pytest.raises(DestinationRefused, match="outside the data-source file directory"):
        datasources.check_destination("bigquery", {"service_account_keys": "/etc/gcp.json"}, POLICY)
    with pytest.raises(DestinationRefused, match="outside the data-source file directory"):
        datasources.check_destination("snowflake", {"account": "a", "private_key_path": "/root/k.p8"}, POLICY)


# --- a missing dialect -------------------------------------------------------------------------------------


def test_a_missing_package_is_a_400_naming_it() -> None:
    missing = [
        e
        for e in ("mssql", "oracle", "snowflake", "bigquery", "databricks", "clickhouse")
        if not installed(e)
    ]
    if not missing:
        pytest.skip("every optional dialect is installed here")
    for engine in missing:
        with pytest.raises(
            BadRequest,
            match=f"pip install {ENGINES[engine].package} \\(or pip install 'agentkb\\[{engine}\\]'\\)",
        ):
            datasources.connection_spec(engine, {}, POLICY)


def test_the_api_names_the_package_to_install(client: httpx.Client, unique: str) -> None:
    if installed("mssql"):
        pytest.skip("pymssql is installed here")
    body = {
        "name": f"ms_{unique}",
        "engine": "mssql",
        "parameters": {"host": "h", "user": "u", "database": "d"},
    }
    problem = assert_problem(client.post("/api/databases", json={"database": body}), 400)
    assert problem["title"] == "Engine not installed" and "pymssql" in problem["detail"]
    assert client.get(f"/api/databases/ms_{unique}").status_code == 404


def installed(engine: str) -> bool:
    module = ENGINES[engine].module
    assert module is not None
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


# --- the SQL each is sent ----------------------------------------------------------------------------------

SHAPES = {
    "limit": "SELECT id, name FROM ds.items WHERE ok = true ORDER BY id LIMIT 5",
    "offset": "SELECT id FROM ds.items ORDER BY id LIMIT 5 OFFSET 10",
    "quoting": "SELECT `odd name` FROM ds.`my table` WHERE name = 'it''s \\\\ here'",
    "schema": "SELECT count(*) AS n FROM ds.sales.orders WHERE active = false",
}
RENDERED = {
    "tsql": {
        "limit": "SELECT TOP 5 id, name FROM items WHERE ok = 1 ORDER BY id",
        "offset": "SELECT id FROM items ORDER BY id OFFSET 10 ROWS FETCH FIRST 5 ROWS ONLY",
        "quoting": "SELECT [odd name] FROM [my table] WHERE name = 'it''s \\ here'",
        "schema": "SELECT COUNT_BIG(*) AS n FROM sales.orders WHERE active = 0",
    },
    "oracle": {
        "limit": "SELECT id, name FROM items WHERE ok = TRUE ORDER BY id NULLS FIRST FETCH FIRST 5 ROWS ONLY",
        "offset": "SELECT id FROM items ORDER BY id NULLS FIRST OFFSET 10 ROWS FETCH FIRST 5 ROWS ONLY",
        "quoting": "SELECT \"odd name\" FROM \"my table\" WHERE name = 'it''s \\ here'",
        "schema": "SELECT COUNT(*) AS n FROM sales.orders WHERE active = FALSE",
    },
    "snowflake": {
        "limit": "SELECT id, name FROM items WHERE ok = TRUE ORDER BY id NULLS FIRST LIMIT 5",
        "offset": "SELECT id FROM items ORDER BY id NULLS FIRST LIMIT 5 OFFSET 10",
        "quoting": 'SELECT "odd name" FROM "my table" WHERE name = \'it\\\'s \\\\ here\'',
        "schema": "SELECT COUNT(*) AS n FROM sales.orders WHERE active = FALSE",
    },
    "bigquery": {
        "limit": "SELECT id, name FROM items WHERE ok = TRUE ORDER BY id LIMIT 5",
        "offset": "SELECT id FROM items ORDER BY id LIMIT 5 OFFSET 10",
        "quoting": "SELECT `odd name` FROM `my table` WHERE name = 'it\\'s \\\\ here'",
        "schema": "SELECT COUNT(*) AS n FROM sales.orders WHERE active = FALSE",
    },
    "redshift": {
        "limit": "SELECT id, name FROM items WHERE ok = TRUE ORDER BY id NULLS FIRST LIMIT 5",
        "offset": "SELECT id FROM items ORDER BY id NULLS FIRST LIMIT 5 OFFSET 10",
        "quoting": 'SELECT "odd name" FROM "my table" WHERE name = \'it\\\'s \\\\ here\'',
        "schema": "SELECT COUNT(*) AS n FROM sales.orders WHERE active = FALSE",
    },
    "databricks": {
        "limit": "SELECT id, name FROM items WHERE ok = TRUE ORDER BY id LIMIT 5",
        "offset": "SELECT id FROM items ORDER BY id LIMIT 5 OFFSET 10",
        "quoting": "SELECT `odd name` FROM `my table` WHERE name = 'it\\'s \\\\ here'",
        "schema": "SELECT COUNT(*) AS n FROM sales.orders WHERE active = FALSE",
    },
    "clickhouse": {
        "limit": "SELECT id, name FROM items WHERE ok = TRUE ORDER BY id NULLS FIRST LIMIT 5",
        "offset": "SELECT id FROM items ORDER BY id NULLS FIRST LIMIT 5 OFFSET 10",
        "quoting": "SELECT \"odd name\" FROM \"my table\" WHERE name = 'it''s \\\\ here'",
        "schema": "SELECT COUNT(*) AS n FROM sales.orders WHERE active = FALSE",
    },
    "duckdb": {
        "limit": "SELECT id, name FROM items WHERE ok = TRUE ORDER BY id NULLS FIRST LIMIT 5",
        "offset": "SELECT id FROM items ORDER BY id NULLS FIRST LIMIT 5 OFFSET 10",
        "quoting": "SELECT \"odd name\" FROM \"my table\" WHERE name = 'it''s \\ here'",
        "schema": "SELECT COUNT(*) AS n FROM sales.orders WHERE active = FALSE",
    },
}


@pytest.mark.parametrize(
    "engine", ["mssql", "oracle", "snowflake", "bigquery", "redshift", "databricks", "clickhouse", "duckdb"]
)
def test_pushed_down_sql_per_engine(engine: str) -> None:
    dialect = dialect_of(engine)
    for shape, sql in SHAPES.items():
        assert pushdown.parse_select(sql).render(dialect) == RENDERED[dialect][shape], (engine, shape)


@pytest.mark.parametrize(
    "engine", ["mssql", "oracle", "snowflake", "bigquery", "redshift", "databricks", "clickhouse"]
)
def test_denied_functions_stay_denied_in_every_dialect(engine: str) -> None:
    dialect = dialect_of(engine)
    for sql in (
        "SELECT pg_read_file('/etc/passwd') FROM ds.t",
        "SELECT * FROM ds.t WHERE x IN (SELECT * FROM read_csv('/etc/passwd'))",
        "SELECT sleep(10) FROM ds.t",
    ):
        with pytest.raises(BadRequest, match="is not allowed"):
            pushdown.parse_select(sql).render(dialect)
    native = {"tsql": "SELECT TOP 1 * FROM t", "bigquery": "SELECT * FROM `p.d.t` LIMIT 1"}.get(
        dialect, "SELECT * FROM t"
    )
    assert pushdown.native_select(native, dialect)
    with pytest.raises(BadRequest, match="Only SELECT"):
        pushdown.native_select("DELETE FROM t", dialect)


def test_agents_tables_resolve_as_upper_folding_databases_do() -> None:
    """Oracle and Snowflake fold unquoted names to upper case, which SQLAlchemy lists in lower case: an
    agent's table is written so the database finds that table, never a quoted lower-case name."""
    tables = (AllowedTable("ora", None, "items"), AllowedTable("ora", None, "MixedCase"))
    for dialect in ("oracle", "snowflake"):
        allowed = AllowList(tables, {"ora": dialect}, ("ora.*",))
        assert fence("SELECT id FROM ora.ITEMS WHERE id = 1", allowed).sql.startswith("SELECT id FROM ITEMS")
        assert fence('SELECT id FROM ora."ITEMS"', allowed).sql == 'SELECT id FROM "ITEMS"'
        assert fence("SELECT id FROM ora.items", allowed).sql == "SELECT id FROM items"
        alias = "" if dialect == "oracle" else "AS "  # Oracle's table aliases take no AS
        assert (
            fence("SELECT id FROM ora.mixedcase", allowed).sql
            == f'SELECT id FROM "MixedCase" {alias}mixedcase'
        )
        with pytest.raises(BadRequest, match="not found"):
            fence("SELECT id FROM ora.other", allowed)
