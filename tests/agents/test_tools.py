"""The agent tools over real components: knowledge bases filled through the HTTP API with the local embedder,
and tables in a real MariaDB and PostgreSQL registered as data sources."""

from __future__ import annotations

import csv
import io
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkb.agents.tools import AgentTools, Citation
from agentkb.destinations import DataSourcePolicy
from agentkb.kb.embedders.registry import EmbedderRegistry
from agentkb.service.catalog.data_sources import DataSourceService
from agentkb.service.catalog.knowledge_bases import KnowledgeBaseService
from agentkb.service.retrieval.kb_select import KBSelect
from agentkb.service.retrieval.search import SearchService
from agentkb.storage.db import Database
from tests import externals
from tests.externals import MARIADB

ROWS = 40
MARIA_COLUMNS = "id INT PRIMARY KEY, name VARCHAR(64), note TEXT"
PG_COLUMNS = "id INT PRIMARY KEY, name TEXT, note TEXT"
KB_HEADER = (
    "Output columns: 'id', 'chunk_id', 'chunk_content', 'metadata', 'distance', 'relevance'\n"
    "Result in CSV format (dialect is 'excel'):\n"
)
KB_ERROR_END = ". Please check that the knowledge base exists and your query syntax is correct."
DOCS = [
    {
        "id": "pw",
        "content": "To reset your password open Settings, choose Security and click Reset password. "
        "A reset link is emailed to you.",
        "topic": "account",
    },
    {
        "id": "billing",
        "content": "Invoices are issued on the first day of each month and can be paid by card "
        "or bank transfer.",
        "topic": "billing",
    },
    {
        "id": "shipping",
        "content": "Orders ship within two business days; international delivery takes up to ten days.",
        "topic": "orders",
    },
]


def _seed() -> list[tuple[int, str, str | None]]:
    rows: list[tuple[int, str, str | None]] = [
        (i, f"row {i}", f"note {i}" if i % 3 else None) for i in range(1, ROWS + 1)
    ]
    rows[0] = (1, "row 1", "x" * 150)  # cut to 100 characters in sql_db_schema's sample
    rows[1] = (2, 'a "quoted", name', "note 2")  # quoted by the excel dialect
    return rows


@dataclass
class World:
    unique: str
    services: dict[str, Any]
    maria_ds: str
    maria_table: str
    maria_other: str
    pg_ds: str
    pg_schema: str
    pg_source: dict[str, Any]

    def tools(
        self,
        *,
        kbs: list[str] | None = None,
        tables: list[str] | None = None,
        project: str | None = None,
        **options: Any,
    ) -> AgentTools:
        return AgentTools(
            project=project or f"tools_{self.unique}",
            knowledge_bases=kbs or [],
            tables=tables or [],
            search=self.services["search"],
            data_sources=self.services["data_sources"],
            kb_service=self.services["kbs"],
            **options,
        )

    @property
    def m(self) -> str:
        return f"{self.maria_ds}.{self.maria_table}"

    @property
    def p(self) -> str:
        return f"{self.pg_ds}.items"


@pytest.fixture(scope="module")
def maria_tables(mariadb: dict[str, Any]) -> Iterator[tuple[str, str]]:
    name = f"agt_{uuid.uuid4().hex[:8]}"
    with (
        externals.table("mariadb", mariadb, name, MARIA_COLUMNS, _seed()),
        externals.table("mariadb", mariadb, f"{name}_other", MARIA_COLUMNS, _seed()),
    ):
        yield name, f"{name}_other"


@pytest.fixture(scope="module")
def pg_schema(pg_source: dict[str, Any]) -> Iterator[str]:
    name = f"agt_{uuid.uuid4().hex[:8]}"
    externals.execute("postgres", pg_source, f"CREATE SCHEMA {name}")
    with (
        externals.table("postgres", pg_source, f"{name}.items", PG_COLUMNS, _seed()),
        externals.table("postgres", pg_source, f"{name}.secret", PG_COLUMNS, _seed()),
    ):
        yield name
    externals.execute("postgres", pg_source, f"DROP SCHEMA {name} CASCADE")


def _maria_snapshot(tables: tuple[str, str]) -> list[Any]:
    return [
        externals.query(
            "mariadb", MARIADB, f"SELECT COUNT(*), SUM(CRC32(CONCAT_WS('|', id, name, note))) FROM {table}"
        )
        for table in tables
    ]


def _pg_snapshot(world: World) -> list[Any]:
    return [
        externals.query(
            "postgres",
            world.pg_source,
            "SELECT count(*), md5(string_agg(concat_ws('|', id, name, note), ',' ORDER BY id)) "
            f"FROM {world.pg_schema}.{t}",
        )
        for t in ("items", "secret")
    ]


def _insert(client: httpx.Client, project: str, kb: str, rows: list[dict[str, Any]]) -> None:
    created = client.post(f"/api/projects/{project}/knowledge_bases", json={"knowledge_base": {"name": kb}})
    assert created.status_code == 201, created.text
    filled = client.put(
        f"/api/projects/{project}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows}}
    )
    assert filled.status_code == 200, filled.text


@pytest.fixture(scope="module")
def world_sync(
    served: Any, base_url: str, maria_tables: tuple[str, str], pg_source: dict[str, Any], pg_schema: str
) -> Iterator[tuple[str, str, str]]:
    """Projects, knowledge bases and data sources, created over HTTP."""
    unique = uuid.uuid4().hex[:8]
    projects = [f"tools_{unique}", f"other_{unique}", f"empty_{unique}"]
    maria_ds, pg_ds = f"maria_{unique}", f"pg_{unique}"
    with httpx.Client(base_url=base_url, timeout=120) as client:
        for project in projects:
            assert client.post("/api/projects", json={"name": project}).status_code == 201
        _insert(client, projects[0], "docs", DOCS)
        _insert(
            client,
            projects[0],
            "bulk",
            [{"content": f"weather report number {i}: mild and sunny"} for i in range(35)],
        )
        _insert(client, projects[1], "secret", [{"content": "the secret password is swordfish"}])
        for name, engine, params in (
            (maria_ds, "mariadb", MARIADB),
            (pg_ds, "postgres", {**pg_source, "schema": pg_schema}),
        ):
            made = client.post(
                "/api/databases", json={"database": {"name": name, "engine": engine, "parameters": params}}
            )
            assert made.status_code == 201, made.text
        yield unique, maria_ds, pg_ds
        for name in (maria_ds, pg_ds):
            client.delete(f"/api/databases/{name}")
        for project, kb in ((projects[0], "docs"), (projects[0], "bulk"), (projects[1], "secret")):
            client.delete(f"/api/projects/{project}/knowledge_bases/{kb}")
        for project in projects:
            client.delete(f"/api/projects/{project}")


@pytest.fixture(scope="module")
async def world(
    world_sync: tuple[str, str, str],
    pg_url: str,
    settings: Any,
    maria_tables: tuple[str, str],
    pg_source: dict[str, Any],
    pg_schema: str,
) -> AsyncIterator[World]:
    unique, maria_ds, pg_ds = world_sync
    db = Database(pg_url, pool_size=2)
    registry = EmbedderRegistry()
    # the suite's PostgreSQL is read over its own socket: the policy that allows local sources
    data_sources = DataSourceService(db, policy=DataSourcePolicy(file_dir=Path("/"), allow_local=True))
    services = {
        "search": KBSelect(SearchService(db, registry)),
        "data_sources": data_sources,
        "kbs": KnowledgeBaseService(db, settings.default_embedding_model, registry.dimension),
    }
    yield World(unique, services, maria_ds, maria_tables[0], maria_tables[1], pg_ds, pg_schema, pg_source)
    data_sources.close()
    await registry.aclose()
    await db.close()


def _csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


# --- knowledge bases -----------------------------------------------------------------------------------


async def test_kb_list_tool(world: World) -> None:
    u = world.unique
    everything = world.tools(kbs=[f"tools_{u}.*"])
    await everything.resolve()
    assert (await everything.call("kb_list_tool", "")).observation == json.dumps(
        [f"tools_{u}.docs", f"tools_{u}.bulk"]
    )
    assert everything.kb_names == [f"tools_{u}.docs", f"tools_{u}.bulk"]

    picked = world.tools(kbs=[f"tools_{u}.docs", f"tools_{u}.missing", f"nope_{u}.*", f"tools_{u}.docs"])
    assert (
        await picked.call("kb_list_tool", "")
    ).observation == f'["tools_{u}.docs"]'  # resolves on first call

    empty = world.tools(kbs=[f"empty_{u}.*"])
    assert (await empty.call("kb_list_tool", "")).observation == "No knowledge bases found."
    assert [s.name for s in empty.specs()] == ["kb_list_tool", "kb_info_tool", "kb_query_tool"]
    assert (await empty.call("sql_db_query", "SELECT 1")).observation.startswith(
        "Unknown tool 'sql_db_query'"
    )


async def test_kb_query_tool_observation(world: World, client: httpx.Client) -> None:
    u = world.unique
    tools = world.tools(kbs=[f"tools_{u}.*"])
    question = "How do I reset my password?"
    result = await tools.call(
        "kb_query_tool", f"$START$ SELECT * FROM tools_{u}.docs WHERE content = '{question}' LIMIT 3 $STOP$"
    )
    obs = result.observation
    assert obs.startswith(KB_HEADER), obs
    body = obs[len(KB_HEADER) :]
    assert body.startswith("id,chunk_id,chunk_content,metadata,distance,relevance\r\n")
    assert body.endswith("\r\n") and "\n" not in body.replace("\r\n", "")
    rows = _csv(body)
    assert len(rows) == 4 and rows[1][0] == "pw"  # the password chunk first
    assert (
        rows[1][3].startswith("{'")
        and "'_chunk_index': 0" in rows[1][3]
        and "'topic': 'account'" in rows[1][3]
    )

    # The same rows as the HTTP search endpoint (one executor): each cell is str() of its value.
    hits = client.post(
        f"/api/projects/tools_{u}/knowledge_bases/docs/search", json={"query": question, "limit": 3}
    ).json()
    expected = io.StringIO()
    csv.writer(expected, dialect="excel").writerows(
        [["id", "chunk_id", "chunk_content", "metadata", "distance", "relevance"]]
        + [
            [str(h[c]) for c in ("id", "chunk_id", "chunk_content", "metadata", "distance", "relevance")]
            for h in hits
        ]
    )
    assert obs == KB_HEADER + expected.getvalue()

    assert result.citations[0] == Citation(
        "kb", f"tools_{u}.docs", hits[0]["chunk_id"], "TextChunkingPreprocessor"
    )
    assert len(result.citations) == 3
    assert result.context[0] == {"page_content": DOCS[0]["content"], "metadata": hits[0]["metadata"]}

    # A bare name resolves in the agent's project; selected columns are kept, in order; fences are stripped.
    picked = await tools.call(
        "kb_query_tool",
        "```sql\nSELECT chunk_content, relevance FROM docs WHERE content = 'monthly invoices' LIMIT 1\n```",
    )
    lines = picked.observation.split("\n", 2)
    assert lines[0] == "Output columns: 'chunk_content', 'relevance'"
    assert _csv(lines[2])[1][0] == DOCS[1]["content"]

    none = await tools.call("kb_query_tool", "SELECT id FROM docs WHERE content = 'x' AND topic = 'nothing'")
    assert none.observation == "Output columns: 'id'\nResult in CSV format (dialect is 'excel'):\nid\r\n"
    assert none.citations == () and none.context == ()


async def test_kb_query_tool_errors(world: World) -> None:
    u = world.unique
    tools = world.tools(kbs=[f"tools_{u}.docs"])
    refused = await tools.call("kb_query_tool", f"SELECT * FROM other_{u}.secret WHERE content = 'password'")
    assert refused.observation == (  # MindsDB's texts (SQLAgent.check_knowledge_base_permission)
        "Error executing knowledge base query: "
        f"Knowledge base other_{u}.secret not found. Available knowledge bases: tools_{u}.docs" + KB_ERROR_END
    )
    assert refused.citations == ()
    other = await tools.call(
        "kb_query_tool", "SELECT * FROM bulk WHERE content = 'weather'"
    )  # same project, not given
    assert "Knowledge base bulk not found" in other.observation

    for bad in (
        "SELEC * FROM docs",
        "",
        "DELETE FROM docs",
        "SELECT * FROM docs WHERE content = 'a' GROUP BY id",
        "SELECT * FROM docs WHERE topic = 'account' OR shade = 'x'",
        "SELECT * FROM docs WHERE relevance < 2",
    ):
        obs = (await tools.call("kb_query_tool", bad)).observation
        assert obs.startswith("Error executing knowledge base query: ") and obs.endswith(KB_ERROR_END), obs


async def test_kb_query_tool_listing_reads_up_to_the_row_cap(world: World) -> None:
    """A listing without LIMIT (one search, or several joined by OR) reads up to the row cap, not the KB."""
    tools = world.tools(kbs=[f"tools_{world.unique}.bulk"], row_cap=5)
    for query in ("SELECT id FROM bulk", "SELECT id FROM bulk WHERE chunk_id != 'a' OR chunk_id = 'b'"):
        result = await tools.call("kb_query_tool", query)
        assert len(_csv(result.observation.split("\n", 2)[2])) == 6 and len(result.context) == 5, query
    limited = await tools.call("kb_query_tool", "SELECT id FROM bulk LIMIT 7")
    assert len(limited.context) == 7


async def test_kb_query_tool_more_than_30_rows(world: World) -> None:
    tools = world.tools(kbs=[f"tools_{world.unique}.bulk"])
    result = await tools.call("kb_query_tool", "SELECT * FROM bulk WHERE content = 'sunny weather' LIMIT 40")
    obs = result.observation
    assert obs.startswith(
        "Output columns: 'id', 'chunk_id', 'chunk_content', 'metadata', 'distance', 'relevance'\n\n"
        "Result has 35 rows. Description of data:\n"
    ), obs
    description, first = obs.split("\n\nFirst 30 rows:\n")
    assert description.splitlines()[4].split()[:2] == ["count", "35"]
    rows = _csv(first)
    assert len(rows) == 31 and rows[0] == [
        "id",
        "chunk_id",
        "chunk_content",
        "metadata",
        "distance",
        "relevance",
    ]
    assert len(result.citations) == len(result.context) == 35


# --- tables --------------------------------------------------------------------------------------------


async def test_list_tables_and_wildcards(world: World) -> None:
    tools = world.tools(tables=[world.m, f"{world.pg_ds}.*", f"missing_{world.unique}.t", world.m])
    assert [s.name for s in tools.specs()] == ["sql_db_list_tables", "sql_db_schema", "sql_db_query"]
    obs = (await tools.call("sql_db_list_tables", "")).observation
    listed = obs.split(", ")
    assert tools.table_names == listed and len(set(listed)) == len(listed)
    # `<ds>.*` is every table an unqualified name reaches: the source's schema, then its search_path
    assert listed[0] == world.m and {f"{world.pg_ds}.items", f"{world.pg_ds}.secret"} <= set(listed)
    assert all(name.startswith(f"{world.pg_ds}.") for name in listed[1:])
    assert (await tools.call("kb_list_tool", "")).observation.startswith("Unknown tool")

    schema_wildcard = world.tools(tables=[f"{world.pg_ds}.{world.pg_schema}.*"])
    await schema_wildcard.resolve()
    assert schema_wildcard.table_names == [
        f"{world.pg_ds}.{world.pg_schema}.items",
        f"{world.pg_ds}.{world.pg_schema}.secret",
    ]
    qualified = await schema_wildcard.call(
        "sql_db_query", f"SELECT count(*) AS n FROM {world.pg_ds}.{world.pg_schema}.secret"
    )
    assert qualified.observation.endswith("n\r\n40\r\n")
    refused = await schema_wildcard.call("sql_db_query", f"SELECT count(*) AS n FROM {world.pg_ds}.secret")
    assert refused.observation == (
        f"Error: Table {world.pg_ds}.secret not found. Available tables: {world.pg_ds}.{world.pg_schema}.*"
    )


async def test_sql_db_query_shapes(world: World) -> None:
    tools = world.tools(tables=[world.m, world.p])
    for table in (world.m, world.p):
        result = await tools.call("sql_db_query", f"SELECT id, name FROM {table} WHERE id <= 3 ORDER BY id")
        assert result.observation == (
            "Output columns: 'id', 'name'\nResult in CSV format (dialect is 'excel'):\n"
            'id,name\r\n1,row 1\r\n2,"a ""quoted"", name"\r\n3,row 3\r\n'
        ), table
        assert result.citations == (Citation("table", table),)
        assert result.context[1] == {"id": 2, "name": 'a "quoted", name'}
    wrapped = await tools.call(
        "sql_db_query", f"$START$\n```sql\nSELECT note FROM {world.p} WHERE id = 3\n```\n$STOP$"
    )
    assert wrapped.observation.endswith("note\r\nNone\r\n")
    # Different spellings of an allowed table still read that table (and only it).
    upper = await tools.call(
        "sql_db_query", f"SELECT {world.maria_table.upper()}.id FROM {world.m.upper()} WHERE id = 1"
    )
    assert upper.observation.endswith("id\r\n1\r\n"), upper.observation
    quoted = await tools.call("sql_db_query", f'SELECT count(*) AS n FROM {world.pg_ds}."ITEMS"')
    assert quoted.observation.endswith("n\r\n40\r\n"), quoted.observation

    everything = await tools.call("sql_db_query", f"SELECT * FROM {world.m} ORDER BY id")
    obs = everything.observation
    assert obs.startswith(
        "Output columns: 'id', 'name', 'note'\n\nResult has 40 rows. Description of data:\n"
    )
    assert len(_csv(obs.split("\n\nFirst 30 rows:\n")[1])) == 31
    joined = await tools.call(
        "sql_db_query",
        f"WITH a AS (SELECT id FROM {world.m} WHERE id < 3) SELECT a.id, t.name FROM a "
        f"JOIN {world.m} t ON t.id = a.id ORDER BY a.id",
    )
    assert joined.observation.endswith('id,name\r\n1,row 1\r\n2,"a ""quoted"", name"\r\n'), joined.observation


async def test_sql_db_query_db_errors(world: World) -> None:
    tools = world.tools(tables=[world.m, world.p, f"{world.pg_ds}.gone"])
    missing = await tools.call("sql_db_query", f"SELECT * FROM {world.pg_ds}.gone")
    assert missing.observation.startswith('Error: relation "gone" does not exist'), missing.observation
    assert missing.observation.endswith(f"\nAvailable tables: {world.m}, {world.p}, {world.pg_ds}.gone")
    column = await tools.call("sql_db_query", f"SELECT nope FROM {world.m}")
    assert column.observation.startswith("Error: ") and "Unknown column" in column.observation
    refused = await tools.call("sql_db_query", f"SELECT * FROM {world.m}_other")
    assert refused.observation == (
        f"Error: Table {world.m}_other not found. Available tables: {world.m}, {world.p}, {world.pg_ds}.gone"
    )


async def test_sql_db_schema(world: World) -> None:
    tools = world.tools(tables=[world.m, world.p])
    result = await tools.call("sql_db_schema", f"{world.m}, {world.p}")
    maria, pg = result.observation.split("\n\nTable named")
    sample = (
        "id,name,note\r\n1,row 1," + "x" * 100 + '...\r\n2,"a ""quoted"", name",note 2\r\n3,row 3,None\r\n'
    )
    assert maria == (
        f"Table named `{world.m}`:\n\n"
        f"Sample with first 3 rows from table {world.m} in CSV format (dialect is 'excel'):\n\n"
        f"{sample}\n\n"
        "Column data types: \n`id` : `INTEGER`,\t\n`name` : `VARCHAR(64)`,\t\n`note` : `TEXT`"
    )
    assert pg == (
        f" `{world.p}`:\n\n"
        f"Sample with first 3 rows from table {world.p} in CSV format (dialect is 'excel'):\n\n"
        f"{sample}\n\n"
        "Column data types: \n`id` : `INTEGER`,\t\n`name` : `TEXT`,\t\n`note` : `TEXT`"
    )
    assert result.citations == (Citation("table", world.m), Citation("table", world.p))
    unknown = await tools.call("sql_db_schema", f"{world.pg_ds}.secret")
    assert unknown.observation == (  # MindsDB's text (SQLAgent._resolve_table_names), then the tables
        f"Error: Tables: {world.pg_ds}.secret not found in the database\nAvailable tables: {world.m}, {world.p}"
    )
    assert (await tools.call("sql_db_schema", "")).observation.startswith("Error: ")


async def test_row_cap(world: World) -> None:
    small = world.tools(tables=[world.p], row_cap=25)
    result = await small.call("sql_db_query", f"SELECT id FROM {world.p} ORDER BY id")
    assert result.observation.endswith("25\r\n(first 25 rows)\n")
    assert len(_csv(result.observation.split("\n", 2)[2])) == 27  # header, 25 rows, the note
    assert len(result.context) == 25
    exact = await small.call("sql_db_query", f"SELECT id FROM {world.p} WHERE id <= 25")
    assert "first" not in exact.observation and len(exact.context) == 25
    larger = world.tools(tables=[world.m], row_cap=35)
    capped = await larger.call("sql_db_query", f"SELECT id FROM {world.m} ORDER BY id")
    assert "\nResult has more than 35 rows (first 35 rows). Description of data:\n" in capped.observation


async def test_statement_timeout(world: World) -> None:
    tools = world.tools(tables=[world.m, world.p], statement_timeout_s=1)
    for table in (world.m, world.p):
        started = time.monotonic()
        t = table
        result = await tools.call(
            "sql_db_query", f"SELECT count(*) FROM {t} a, {t} b, {t} c, {t} d, {t} e, {t} f, {t} g"
        )
        assert time.monotonic() - started < 10, table
        assert result.observation.startswith("Error: "), result.observation
        # the pooled connection is still usable afterwards
        after = await tools.call("sql_db_query", f"SELECT count(*) AS n FROM {table}")
        assert after.observation.endswith("n\r\n40\r\n"), after.observation


HOSTILE = [
    "DROP TABLE {m}",
    "TRUNCATE {m}",
    "UPDATE {m} SET name = 'x'",
    "DELETE FROM {m}",
    "DELETE FROM {p} WHERE id > 0",
    "SELECT 1 FROM {m}; DELETE FROM {m}",
    "SELECT * FROM {p};DELETE FROM {p}",
    "INSERT INTO {m} SELECT * FROM {m}",
    "SELECT * FROM {mo}",
    "SELECT * FROM {md}.`{mt}_other`",
    "SELECT * FROM {m} WHERE id IN (SELECT id FROM {mo})",
    "WITH s AS (SELECT * FROM {mo}) SELECT * FROM s",
    "(WITH {mt}_other AS (SELECT 1 AS id) SELECT id FROM {mt}_other) UNION SELECT id FROM {mo}",
    "SELECT * FROM {pd}.secret",
    'SELECT * FROM {pd}."SECRET"',
    "SELECT * FROM {m} JOIN {p} ON true",
    "SELECT * FROM mindsdb.models",
    "SELECT * FROM information_schema.tables",
    "SELECT * FROM {md}.information_schema.tables",
    "SELECT * FROM {pd}.pg_catalog.pg_user",
    "SELECT * FROM {pd}.pg_user",
    "SELECT * FROM {p} WHERE id = (SELECT count(*) FROM pg_catalog.pg_user)",
    "SELECT * FROM {md}.mysql.user",
    "SELECT * FROM mysql.user",
    "SELECT pg_sleep(5) FROM {p}",
    "SELECT * FROM {p}, pg_sleep(5)",
    "SELECT sleep(5) FROM {m}",
    "SELECT benchmark(100000000, md5('a')) FROM {m}",
    "SELECT pg_read_file('/etc/passwd') FROM {p}",
    "SELECT lo_import('/etc/passwd') FROM {p}",
    "SELECT load_file('/etc/passwd') FROM {m}",
    "SELECT current_setting('data_directory') FROM {p}",
    "SELECT @@datadir FROM {m}",
    "SELECT set_config('default_transaction_read_only', 'off', false) FROM {p}",
    "SELECT public.evil(id) FROM {p}",
    "COPY {p} TO '/tmp/agentkb_copy'",
    "SELECT * FROM {m} INTO OUTFILE '/tmp/agentkb_out'",
    "SELECT * INTO OUTFILE '/tmp/agentkb_out' FROM {m}",
    "SET max_statement_time = 0",
    "CALL {md}.evil()",
    "WITH x AS (DELETE FROM {p} RETURNING *) SELECT * FROM x",
    "SELECT * FROM {m} FOR UPDATE",
    "SELECT * FROM {p} FOR SHARE",
    "SELECT * FROM {m} -- hide\n; DELETE FROM {m}",
    "SELECT * FROM {m} /* x */; DELETE FROM {m} /* y */",
    "SELECT * FROM {m} WHERE name = 'a'; DELETE FROM {m}; --'",
    "SELECT * FROM {m}\uff1bDELETE FROM {m}",
    "SELECT * FROM {md}.{mt}\u0430",
    "SELECT * FROM {m}\x00; DELETE FROM {m}",
    "EXPLAIN ANALYZE SELECT * FROM {p}",
    "SHOW TABLES",
    "LOCK TABLES {m} WRITE",
    "$START$ DELETE FROM {m} $STOP$",
    "```sql\nDROP TABLE {p}\n```",
]


@pytest.mark.parametrize("template", HOSTILE)
async def test_hostile_queries_are_refused(world: World, template: str) -> None:
    before = (_maria_snapshot((world.maria_table, world.maria_other)), _pg_snapshot(world))
    tools = world.tools(tables=[world.m, world.p], statement_timeout_s=3)
    sql = template.format(
        m=world.m, p=world.p, mo=f"{world.m}_other", md=world.maria_ds, mt=world.maria_table, pd=world.pg_ds
    )
    started = time.monotonic()
    result = await tools.call("sql_db_query", sql)
    assert result.observation.startswith("Error: "), (sql, result.observation)
    assert result.citations == () and result.context == ()
    assert time.monotonic() - started < 3
    assert (_maria_snapshot((world.maria_table, world.maria_other)), _pg_snapshot(world)) == before


async def test_harmless_tricks_run_read_only(world: World) -> None:
    """Text the parser drops or keeps inside a string never runs as SQL."""
    before = _maria_snapshot((world.maria_table, world.maria_other))
    tools = world.tools(tables=[world.m])
    for sql in (
        f"SELECT count(*) AS n FROM {world.m} /*! ; DELETE FROM {world.maria_table} */",
        f"SELECT count(*) AS n FROM {world.m} WHERE name <> 'x\\'; DELETE FROM {world.m}; -- '",
    ):
        assert (await tools.call("sql_db_query", sql)).observation.endswith("n\r\n40\r\n"), sql
    assert _maria_snapshot((world.maria_table, world.maria_other)) == before
