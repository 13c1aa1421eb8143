"""The MindsDB Python SDK (mindsdb_sdk 3.5.0, unchanged) driving a served agentkb over real HTTP.

`test_full_session` is the session docs/mindsdb-sdk.md walks through: a data source, a knowledge base fed
with DataFrame rows, a query, uploaded files and crawled pages, searched with `find`, then an extractive
agent and an OpenAI-compatible one (a scripted stub) answering plainly and streamed, updated, listed and
dropped. Every call is the SDK's own; nothing here talks to agentkb directly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import requests

from tests import externals
from tests.ingest.fixtures import MAKERS
from tests.ingest.site import GeneratedSite
from tests.openai_stub import OpenAIStub, text, tool_call

mindsdb_sdk = pytest.importorskip("mindsdb_sdk", reason="install the dev extra: pip install -e '.[dev]'")

KB_COLUMNS = ["id", "chunk_id", "chunk_content", "metadata", "distance", "relevance"]
PAGE_FILTER = r".*/p/(0|[2-9])\.html"  # the SDK's `filters`: regexes the crawled URLs must match (not /p/1)


@pytest.fixture()
def server(base_url: str) -> Any:
    return mindsdb_sdk.connect(base_url)


@pytest.fixture()
def pg_table(unique: str, pg_source: dict[str, Any]) -> Iterator[str]:
    products = [
        (100, "A cast-iron skillet that keeps heat for searing steak.", "forge"),
        (101, "Noise-cancelling headphones for long flights.", "sonic"),
    ]
    columns = "id INT PRIMARY KEY, description TEXT, vendor TEXT"
    with externals.table("postgres", pg_source, f"sdk_products_{unique}", columns, products) as table:
        yield table


@pytest.fixture(scope="module")
def site() -> Iterator[GeneratedSite]:
    with GeneratedSite(40) as served:  # /p/0 links /p/1..10 (and nav links to /p/0..2)
        yield served


@pytest.fixture(scope="module")
def llm() -> Iterator[OpenAIStub]:
    with OpenAIStub() as stub:
        yield stub


def test_status_projects_and_databases(server: Any, unique: str, pg_source: dict[str, Any]) -> None:
    assert server.status()["mindsdb_version"]
    assert "mindsdb" in [p.name for p in server.list_projects()]
    project = server.create_project(f"sdkproj_{unique}")
    assert project.name in [p.name for p in server.list_projects()]
    server.drop_project(project.name)
    assert project.name not in [p.name for p in server.list_projects()]

    db = server.create_database(f"sdkpg_{unique}", engine="postgres", connection_args=pg_source)
    assert db.name in [d.name for d in server.list_databases()]
    server.drop_database(db.name)
    assert db.name not in [d.name for d in server.list_databases()]


def ask(question: str) -> list[dict[str, Any]]:
    return [{"question": question, "answer": None}]


def kinds(chunks: list[dict[str, Any]]) -> list[str]:
    return [c.get("type") or next(k for k in ("actions", "steps", "output") if k in c) for c in chunks]


def first_id(kb: Any, question: str, limit: int = 3) -> Any:
    found = kb.find(question, limit=limit).fetch()
    # MindsDB's columns; a KB with metadata keys has them too, between relevance and metadata
    assert list(found.columns[:3]) == KB_COLUMNS[:3] and set(KB_COLUMNS) <= set(found.columns), found.columns
    assert 0 < len(found) <= limit
    return found.iloc[0]["id"]


def status_of(error: pytest.ExceptionInfo[requests.HTTPError]) -> int:
    assert error.value.response is not None
    return int(error.value.response.status_code)


def test_full_session(
    server: Any,
    unique: str,
    pg_source: dict[str, Any],
    pg_table: str,
    tmp_path: Path,
    site: GeneratedSite,
    llm: OpenAIStub,
) -> None:
    # --- a project and a data source ------------------------------------------------------------------
    project = server.create_project(f"sdk_{unique}")
    source = server.create_database(f"sdk_src_{unique}", engine="postgres", connection_args=pg_source)
    listed = {d.name: d for d in server.list_databases()}
    assert listed[source.name].engine == "postgres"
    assert json.loads(listed[source.name].params)["host"] == pg_source["host"]  # JSON text, as MindsDB

    # --- a knowledge base -----------------------------------------------------------------------------
    kb = project.knowledge_bases.create(
        f"catalog_{unique}", metadata_columns=["vendor"], content_columns=["description"], id_column="id"
    )
    assert [k.name for k in project.knowledge_bases.list()] == [kb.name]
    assert (
        kb.metadata_columns == ["vendor"] and kb.content_columns == ["description"] and kb.id_column == "id"
    )
    assert kb.embedding_model["provider"] == "local" and kb.params["vector_size"] == 384

    # rows: a DataFrame, a dict, and the result of a query over the data source (only id 100 passes)
    kb.insert(
        pd.DataFrame(
            [
                {"id": 1, "description": "A lightweight tent that sleeps two hikers.", "vendor": "trail"},
                {"id": 2, "description": "An espresso machine with a steam wand for milk.", "vendor": "brew"},
            ]
        )
    )
    kb.insert({"id": 3, "description": "A mechanical keyboard with clicky switches.", "vendor": "keys"})
    kb.insert_query(source.tables.get(pg_table).filter(id=100))

    # files: uploaded as the SDK uploads them (PUT /api/files/<name>), then inserted by path or name
    pdf, docx = tmp_path / f"report_{unique}.pdf", tmp_path / f"handbook_{unique}.docx"
    MAKERS["report.pdf"](pdf)
    MAKERS["handbook.docx"](docx)
    server.api.upload_file(pdf.name, str(pdf))  # what `agents.add_files` does for each path
    server.api.upload_file(docx.name, str(docx))
    assert server.api.get_file_metadata(pdf.stem)["page_count"] == 2
    # a DataFrame becomes a CSV file through the `files` database's tables (agentkb does not list `files`
    # among the databases, so the Database object is made directly; see docs/mindsdb-sdk.md)
    files_db = server.databases.files  # the `files` data source, listed as MindsDB lists it
    files_db.tables.create(
        f"gear_{unique}",
        pd.DataFrame(
            [
                {"id": 7, "description": "A waterproof rain jacket with a hood.", "vendor": "trail"},
                {"id": 8, "description": "A cordless drill with two batteries.", "vendor": "tools"},
            ]
        ),
    )
    assert server.api.get_file_metadata(f"gear_{unique}")["row_count"] == 2
    kb.insert_files([str(pdf), str(docx), f"gear_{unique}"])

    # web pages: a crawl of the loopback site, one link deep, URLs filtered by regex, at most 3 pages
    # (/p/0 links /p/1, /p/2, /p/3, ... in that order; the filter drops /p/1, the limit stops after /p/3)
    site.reset()
    start = f"{site.url}/p/0.html"
    kb.insert_webpages([start], crawl_depth=1, filters=[PAGE_FILTER], limit=3)
    # breadth-first, links in page order, no page fetched beyond the limit, none outside the filter
    assert sorted(p for p in site.paths() if p != "/robots.txt") == ["/p/0.html", "/p/2.html", "/p/3.html"]

    # what the KB holds: listing it (SELECT * FROM <project>.<kb>) returns every chunk
    chunks = kb.fetch()
    # MindsDB's order once the KB has metadata keys: they are columns too, between relevance and metadata
    assert list(chunks.columns[:5]) == ["id", "chunk_id", "chunk_content", "distance", "relevance"]
    assert chunks.columns[-1] == "metadata" and "vendor" in chunks.columns
    ids = set(chunks["id"])
    pages = {i for i in ids if isinstance(i, str) and i.startswith(site.url)}
    assert pages == {f"{site.url}/p/{k}.html" for k in (0, 2, 3)}
    assert {1, 2, 3, 100, 7, 8, f"report_{unique}#p1", f"report_{unique}#p2", f"handbook_{unique}#p3"} <= ids
    assert 101 not in ids  # filtered out by insert_query's WHERE

    # --- find: the right chunk first ------------------------------------------------------------------
    assert first_id(kb, "camping gear for two people") == 1
    assert first_id(kb, "cooking a steak", limit=1) == 100
    assert first_id(kb, "coffee with steamed milk") == 2
    assert first_id(kb, "jacket for rainy weather") == 7
    assert first_id(kb, "ocean tides") == f"report_{unique}#p2"
    assert first_id(kb, "how often to feed the cat") == f"handbook_{unique}#p3"
    page_hit = kb.find("Page 2", limit=3).fetch().iloc[0]
    assert page_hit["id"] == f"{site.url}/p/2.html" and page_hit["metadata"]["title"] == "Page 2"
    steak = kb.find("cooking a steak", limit=1).fetch().iloc[0]
    assert steak["metadata"]["vendor"] == "forge" and "cast-iron skillet" in steak["chunk_content"]
    assert steak["chunk_id"].startswith("100:description:1of1:")
    assert len(kb.find("anything", limit=2).fetch()) == 2

    again = project.knowledge_bases.get(kb.name)
    assert again.metadata_columns == ["vendor"] and again.id_column == "id"

    # --- an agent with the default (extractive) model -------------------------------------------------
    agents = project.agents
    extractive = agents.create(f"helper_{unique}", data={"knowledge_bases": [f"{project.name}.{kb.name}"]})
    assert extractive.model == {"provider": "extractive", "model_name": "extractive"}
    assert extractive.data["knowledge_bases"] == [f"{project.name}.{kb.name}"]

    question = "How often should I feed my cat?"
    answer = extractive.completion(ask(question))
    assert answer.content.startswith("Based on the knowledge base:\n\n1. ")
    assert "Feed them twice a day." in answer.content.split("\n\n")[1]
    assert f"(source: {project.name}.{kb.name}, handbook_{unique})" in answer.content
    assert "Feed them twice a day." in answer.context[0]["page_content"]
    same = agents.completion(extractive.name, ask(question))
    assert same.content == answer.content

    streamed = list(extractive.completion_stream(ask(question)))
    assert kinds(streamed) == ["start", "actions", "steps", "actions", "steps", "output", "end"]
    trace = streamed[0]["trace_id"]
    assert streamed[0] == {"type": "start", "prompt": question, "trace_id": trace}
    assert streamed[1]["actions"][0]["tool"] == "kb_list_tool"
    assert streamed[2]["steps"][0]["observation"] == f'["{project.name}.{kb.name}"]'
    query = streamed[3]["actions"][0]
    assert query["tool"] == "kb_query_tool"
    assert (
        query["tool_input"] == f"SELECT * FROM {project.name}.{kb.name} WHERE content = '{question}' LIMIT 5"
    )
    assert "Feed them twice a day." in streamed[4]["steps"][0]["observation"]
    assert streamed[5]["output"] == answer.content and streamed[5]["trace_id"] == trace
    assert streamed[6] == {"type": "end"}

    # the SDK's add_webpages: crawls into the named KB and adds the KB to the agent (stored qualified, once)
    extractive.add_webpages(
        [f"{site.url}/p/4.html"], "Generated pages.", knowledge_base=kb.name, crawl_depth=0
    )
    extractive = agents.get(extractive.name)
    assert extractive.data["knowledge_bases"] == [f"{project.name}.{kb.name}"]
    assert extractive.prompt_template == "\nGenerated pages."
    assert f"{site.url}/p/4.html" in set(kb.fetch()["id"])

    # an agent is also a table for SQL
    sql_answer = project.query(f"SELECT answer FROM {extractive.name} WHERE question = '{question}'").fetch()
    assert sql_answer["answer"][0] == answer.content

    # --- an agent with an OpenAI-compatible model (the scripted stub) ---------------------------------
    model = {"provider": "openai", "model_name": "gpt-4o", "base_url": llm.base_url, "api_key": "sk-test"}
    writer = agents.create(
        f"writer_{unique}",
        model=model,
        data={"knowledge_bases": [kb.name]},
        prompt_template="Answer from the product catalog.",
    )
    assert writer.model == model and writer.prompt_template == "Answer from the product catalog."
    assert writer.data["knowledge_bases"] == [f"{project.name}.{kb.name}"]

    sql = f"SELECT * FROM {project.name}.{kb.name} WHERE content = 'searing steak' LIMIT 2"
    llm.script(
        tool_call("kb_query_tool", sql, thought="I will search the catalog."),
        text("Use the cast-iron skillet."),
    )
    reply = writer.completion(ask("What should I sear a steak in?"))
    assert reply.content == "Use the cast-iron skillet."
    assert "cast-iron skillet" in reply.context[0]["page_content"]
    first, second = llm.requests
    assert first.body["model"] == "gpt-4o" and first.headers["authorization"] == "Bearer sk-test"
    assert (
        first.messages[0]["role"] == "system"
        and "Answer from the product catalog." in first.messages[0]["content"]
    )
    assert first.messages[-1] == {"role": "user", "content": "What should I sear a steak in?"}
    assert {t["function"]["name"] for t in first.body["tools"]} == {
        "kb_list_tool",
        "kb_info_tool",
        "kb_query_tool",
    }
    assert second.messages[-1]["role"] == "tool" and "cast-iron skillet" in second.messages[-1]["content"]

    llm.script(
        tool_call("kb_query_tool", sql, thought="I will search the catalog."),
        text("Use the cast-iron skillet."),
    )
    streamed = list(agents.completion_stream(writer.name, ask("What should I sear a steak in?")))
    assert kinds(streamed) == ["start", "actions", "steps", "output", "end"]
    action = {"tool": "kb_query_tool", "tool_input": sql, "log": "I will search the catalog."}
    assert streamed[1]["actions"] == [action]
    assert streamed[2]["steps"][0]["action"] == action
    assert "cast-iron skillet" in streamed[2]["steps"][0]["observation"]
    assert streamed[3]["output"] == "Use the cast-iron skillet."
    assert streamed[3]["sources"][0]["name"] == f"{project.name}.{kb.name}"

    # --- update through the Agent object: prompt template and model -----------------------------------
    before = agents.get(writer.name)
    before.prompt_template = "Answer in one sentence."
    before.model = {**model, "model_name": "gpt-4o-mini"}
    updated = agents.update(before.name, before)
    assert (
        updated.prompt_template == "Answer in one sentence." and updated.model["model_name"] == "gpt-4o-mini"
    )
    assert updated.created_at == writer.created_at and updated.updated_at > writer.updated_at
    assert updated.data == writer.data
    llm.script(text("A skillet."))
    assert agents.completion(writer.name, ask("Sear with what?")).content == "A skillet."
    assert llm.requests[0].body["model"] == "gpt-4o-mini"
    assert "Answer in one sentence." in llm.requests[0].messages[0]["content"]

    # --- list, get, drop ------------------------------------------------------------------------------
    assert sorted(a.name for a in agents.list()) == sorted([extractive.name, writer.name])
    got = agents.get(writer.name)
    assert (got.name, got.model, got.prompt_template) == (
        writer.name,
        updated.model,
        "Answer in one sentence.",
    )
    agents.drop(writer.name)
    agents.drop(extractive.name)
    assert agents.list() == []
    with pytest.raises(requests.HTTPError) as missing:
        agents.get(writer.name)
    assert status_of(missing) == 404

    project.knowledge_bases.drop(kb.name)
    assert project.knowledge_bases.list() == []
    with pytest.raises(requests.HTTPError) as missing:
        project.knowledge_bases.get(kb.name)
    assert status_of(missing) == 404
    server.drop_database(source.name)
    server.drop_project(project.name)
    assert project.name not in [p.name for p in server.list_projects()]
