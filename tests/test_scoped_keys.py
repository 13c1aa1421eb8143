"""Scoped API keys over real HTTP: a read-only key reads, searches and asks agents, and every write it
tries (REST, SQL, MCP, the console) is a 403 that leaves nothing behind; a project key sees its own
projects only. The keys are made through the auth service (as `agentkb keys create` does), on a database of
this module's own; the service-level test proves the scope is enforced beneath the routes."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agentkb.errors import Forbidden
from agentkb.service.platform import access
from agentkb.service.platform.access import Principal
from tests.conftest import ServedApp
from tests.helpers import assert_problem, served_with_login
from tests.test_auth import agentkb, cli_env
from tests.test_console import csrf_of

USER, PASSWORD = "scope-admin", "a scoped password"
ROWS = [
    {"id": 1, "content": "The cheetah is the fastest land animal, reaching 110 km/h in short bursts."},
    {"id": 2, "content": "Emperor penguins huddle together to survive the Antarctic winter."},
]
READ_ONLY = "This API key is read-only: "


def headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def app(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApp]:
    with served_with_login(pg_url, tmp_path_factory.mktemp("scoped"), "scoped", USER, PASSWORD) as served:
        yield served


@pytest.fixture(scope="module")
def world(app: ServedApp, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two projects, each with a knowledge base of ROWS and an extractive agent over it; a SQLite data
    source, an uploaded file; a full, a read-only and a project key."""
    tag = uuid.uuid4().hex[:6]
    alpha, beta = f"alpha_{tag}", f"beta_{tag}"
    token = httpx.post(f"{app.url}/api/login", json={"username": USER, "password": PASSWORD}).json()["token"]
    lite = tmp_path_factory.mktemp("scoped-ds") / "zoo.db"
    with sqlite3.connect(lite) as conn:
        conn.execute("CREATE TABLE animals (name TEXT)")
        conn.execute("INSERT INTO animals VALUES ('cheetah')")
    with httpx.Client(base_url=app.url, timeout=120, headers=headers(token)) as c:
        for project in (alpha, beta):
            assert c.post("/api/projects", json={"name": project}).status_code == 201
            base = f"/api/projects/{project}"
            kb = {"knowledge_base": {"name": "kb"}}
            assert c.post(f"{base}/knowledge_bases", json=kb).status_code == 201
            r = c.put(f"{base}/knowledge_bases/kb", json={"knowledge_base": {"rows": ROWS}})
            assert r.status_code == 200, r.text
            agent = {"agent": {"name": "helper", "data": {"knowledge_bases": [f"{project}.kb"]}}}
            assert c.post(f"{base}/agents", json=agent).status_code == 201
        ds = {"database": {"name": f"zoo_{tag}", "engine": "sqlite", "parameters": {"db_file": str(lite)}}}
        assert c.post("/api/databases", json=ds).status_code == 201
        up = c.put(f"/api/files/pets_{tag}", files={"file": ("pets.csv", b"name,kind\nrex,dog\n")})
        assert up.status_code == 200, up.text
        export = c.get(f"/api/projects/{alpha}/knowledge_bases/kb/export")
        assert export.status_code == 200

    async def make(services: Any) -> dict[str, str]:
        auth = services.auth
        return {
            "full": await auth.create_key(f"full-{tag}"),
            "ro": await auth.create_key(f"ro-{tag}", read_only=True),
            "alpha": await auth.create_key(f"alpha-{tag}", projects=[alpha]),
            "alpha_ro": await auth.create_key(f"alpha-ro-{tag}", read_only=True, projects=[alpha.upper()]),
        }

    from agentkb.cli.keys import with_services

    keys = with_services(app_settings(app), make)
    return {
        "tag": tag,
        "alpha": alpha,
        "beta": beta,
        "ds": f"zoo_{tag}",
        "file": f"pets_{tag}",
        "export": export.content,
        "keys": keys,
        "token": token,
    }


def app_settings(app: ServedApp) -> Any:
    return app.uvicorn.server.config.app.state.settings


def client(app: ServedApp, key: str) -> httpx.Client:
    return httpx.Client(base_url=app.url, timeout=120, headers=headers(key))


def sql(c: httpx.Client, query: str) -> dict[str, Any]:
    r = c.post("/api/sql/query", json={"query": query})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def state(app: ServedApp, world: dict[str, Any]) -> dict[str, Any]:
    """What a full key sees: the projects, their agents and KBs (with counts), data sources, files."""
    with client(app, world["keys"]["full"]) as c:
        found: dict[str, Any] = {
            "projects": sorted(p["name"] for p in c.get("/api/projects").json()),
            "databases": sorted(d["name"] for d in c.get("/api/databases").json()),
            "files": sorted(f["name"] for f in c.get("/api/files").json()),
        }
        for project in (world["alpha"], world["beta"]):
            base = f"/api/projects/{project}"
            agents = c.get(f"{base}/agents").json()
            found[f"{project}.agents"] = sorted((a["name"], json.dumps(a["data"])) for a in agents)
            found[f"{project}.kbs"] = sorted(k["name"] for k in c.get(f"{base}/knowledge_bases").json())
            found[f"{project}.chunks"] = sql(c, f"SELECT id, chunk_content FROM {project}.kb")["data"]
        return found


# --- the keys and their scope -----------------------------------------------------------------------------


def test_cli_creates_scoped_keys_and_lists_their_scope(app: ServedApp, world: dict[str, Any]) -> None:
    settings = app_settings(app)
    env = cli_env(str(settings.database_url), settings.data_dir)
    name = f"cli-{world['tag']}"
    made = agentkb(
        "keys", "create", name, "--read-only", "--project", f"{world['beta']},{world['alpha']}", env=env
    )
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip().splitlines()[-1]
    listed = agentkb("keys", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    lines = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
    assert lines[name].endswith(f"read-only, projects {world['alpha']},{world['beta']}")
    assert lines[f"full-{world['tag']}"].endswith("read-write, all projects")
    with client(app, key) as c:  # the key works, with its scope
        assert c.get(f"/api/projects/{world['beta']}/agents").status_code == 200
        refused = c.delete(f"/api/projects/{world['beta']}/agents/helper")
        assert READ_ONLY in assert_problem(refused, 403)["detail"]
    unknown = agentkb("keys", "create", f"bad-{world['tag']}", "--project", "no_such_project", env=env)
    assert unknown.returncode == 1 and "no_such_project does not exist" in unknown.stderr


# --- a read-only key ------------------------------------------------------------------------------------------


def test_read_only_key_reads_searches_and_asks(app: ServedApp, world: dict[str, Any]) -> None:
    alpha = world["alpha"]
    with client(app, world["keys"]["ro"]) as c:
        assert {world["alpha"], world["beta"]} <= {p["name"] for p in c.get("/api/projects").json()}
        assert [a["name"] for a in c.get(f"/api/projects/{alpha}/agents").json()] == ["helper"]
        assert c.get(f"/api/projects/{alpha}/knowledge_bases/kb").status_code == 200
        hits = c.post(f"/api/projects/{alpha}/knowledge_bases/kb/search", json={"query": "fastest animal"})
        assert hits.status_code == 200 and hits.json(), hits.text
        assert len(sql(c, f"SELECT * FROM {alpha}.kb WHERE content = 'penguins'")["data"]) >= 1
        assert sql(c, f"SELECT * FROM {world['ds']}.animals")["data"] == [["cheetah"]]
        assert sql(c, f"SELECT * FROM files.{world['file']}")["data"] == [["rex", "dog"]]
        assert sql(c, "SHOW DATABASES")["type"] == "table"
        asked = c.post(
            f"/api/projects/{alpha}/agents/helper/completions",
            json={"messages": [{"question": "Which animal is the fastest?", "answer": None}]},
        )
        assert asked.status_code == 200 and "cheetah" in asked.json()["message"]["content"], asked.text
        answer = sql(c, f"SELECT answer FROM {alpha}.helper WHERE question = 'What do penguins do?'")
        assert answer["type"] == "table" and "penguin" in answer["data"][0][0].lower()
        chat = c.post(
            "/v1/chat/completions",
            json={"model": f"{alpha}.helper", "messages": [{"role": "user", "content": "fastest animal?"}]},
        )
        assert chat.status_code == 200 and "cheetah" in chat.json()["choices"][0]["message"]["content"]
        assert c.get(f"/api/projects/{alpha}/knowledge_bases/kb/export").status_code == 200
        assert c.get(f"/api/projects/{alpha}/knowledge_bases/kb/jobs").status_code == 200


def write_requests(world: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """Every write route, with a body it would accept from a full key."""
    alpha, tag = world["alpha"], world["tag"]
    base = f"/api/projects/{alpha}"
    ds = {"database": {"name": f"new_{tag}", "engine": "sqlite", "parameters": {"db_file": "/tmp/x.db"}}}
    return [
        ("POST", "/api/projects", {"json": {"name": f"new_{tag}"}}),
        ("DELETE", f"/api/projects/{world['beta']}", {}),
        ("POST", f"{base}/agents", {"json": {"agent": {"name": "intruder"}}}),
        ("PUT", f"{base}/agents/helper", {"json": {"agent": {"prompt_template": "Say yes."}}}),
        ("DELETE", f"{base}/agents/helper", {}),
        ("POST", f"{base}/knowledge_bases", {"json": {"knowledge_base": {"name": "intruder"}}}),
        (
            "PUT",
            f"{base}/knowledge_bases/kb",
            {"json": {"knowledge_base": {"rows": [{"id": 9, "content": "x"}]}}},
        ),
        ("PUT", f"{base}/knowledge_bases/kb", {"json": {"knowledge_base": {"params": {"ef_search": 50}}}}),
        ("DELETE", f"{base}/knowledge_bases/kb", {}),
        ("DELETE", f"{base}/knowledge_bases/kb/jobs/0123456789abcdef", {}),
        (
            "POST",
            f"{base}/knowledge_bases/import",
            {"files": {"file": ("kb.gz", world["export"])}, "data": {"name": "copy"}},
        ),
        ("POST", f"{base}/knowledge_bases/kb/evaluate", {"json": {"test_table": f"files.{world['file']}"}}),
        ("PUT", f"/api/files/up_{tag}", {"files": {"file": ("a.csv", b"a\n1\n")}}),
        ("DELETE", f"/api/files/{world['file']}", {}),
        ("POST", "/api/databases", {"json": ds}),
        (
            "PUT",
            f"/api/databases/{world['ds']}",
            {"json": {"database": {"parameters": {"db_file": "/etc/passwd"}}}},
        ),
        ("DELETE", f"/api/databases/{world['ds']}", {}),
        ("POST", f"{base}/jobs", {"json": {"job": {"name": "intruder", "query": "SELECT 1"}}}),
        ("POST", f"{base}/jobs/any_job/run", {}),
        ("DELETE", f"{base}/jobs/any_job", {}),
    ]


def sql_writes(world: dict[str, Any]) -> list[str]:
    alpha, tag = world["alpha"], world["tag"]
    return [
        f"CREATE AGENT {alpha}.intruder USING model = 'extractive'",
        f"ALTER AGENT {alpha}.helper USING prompt_template = 'Say yes.'",
        f"DROP AGENT {alpha}.helper",
        f"INSERT INTO {alpha}.kb (id, content) VALUES (9, 'planted')",
        f"DELETE FROM {alpha}.kb WHERE id = 1",
        f"UPDATE {alpha}.kb SET content = 'changed' WHERE chunk_id = '1:content:1of1:0to73'",
        f"CREATE KNOWLEDGE_BASE {alpha}.intruder",
        f"ALTER KNOWLEDGE_BASE {alpha}.kb USING ef_search = 50",
        f"DROP KNOWLEDGE_BASE {alpha}.kb",
        f"CREATE INDEX ON KNOWLEDGE_BASE {alpha}.kb",
        f"CREATE DATABASE new_{tag}",
        f"CREATE PROJECT new_{tag}",
        f"DROP DATABASE {world['ds']}",
        f"DROP PROJECT {world['beta']}",
        f"ALTER DATABASE {world['beta']} NAME = 'renamed_{tag}'",
        f"DROP TABLE files.{world['file']}",
        f"EVALUATE KNOWLEDGE_BASE {alpha}.kb USING test_table = 'files.{world['file']}'",
        "SELECT query_cancel(1)",
        f"CREATE JOB {alpha}.intruder (SELECT 1)",
        f"DROP JOB IF EXISTS {alpha}.any_job",
    ]


def test_read_only_key_is_refused_every_write_and_nothing_changes(
    app: ServedApp, world: dict[str, Any]
) -> None:
    before = state(app, world)
    with client(app, world["keys"]["ro"]) as c:
        for method, path, kwargs in write_requests(world):
            r = c.request(method, path, **kwargs)
            body = assert_problem(r, 403)
            assert body["detail"].startswith(READ_ONLY) and body["detail"].endswith(" is not allowed"), (
                method,
                path,
                body,
            )
        for statement in sql_writes(world):
            answer = sql(c, statement)
            assert answer["type"] == "error" and answer["error_message"].startswith(READ_ONLY), (
                statement,
                answer,
            )
        assert "SQL CREATE AGENT is not allowed" in sql(c, sql_writes(world)[0])["error_message"]
        # the OpenAI-compatible routes and the rest still read
        assert c.get("/v1/models").status_code == 200
    assert state(app, world) == before


async def test_read_only_key_over_mcp_reads_only(app: ServedApp, world: dict[str, Any]) -> None:
    http = httpx2.AsyncClient(headers=headers(world["keys"]["ro"]), timeout=120)
    async with Client(streamable_http_client(f"{app.url}/mcp", http_client=http)) as mcp:
        listed = (await mcp.call_tool("list_knowledge_bases", {})).structured_content
        assert {kb["project"] for kb in listed["knowledge_bases"]} >= {world["alpha"], world["beta"]}
        found = await mcp.call_tool(
            "search_knowledge_base", {"knowledge_base": f"{world['alpha']}.kb", "query": "penguins"}
        )
        assert not found.is_error, found.content
        # the query tool's fence lets SELECT through only
        refused = await mcp.call_tool("query", {"sql": f"DELETE FROM {world['ds']}.animals"})
        assert refused.is_error


def test_console_shows_the_refusal(app: ServedApp, world: dict[str, Any]) -> None:
    with httpx.Client(base_url=app.url, timeout=60, follow_redirects=True) as c:
        form = c.get("/console/login")
        c.post("/console/login", data={"csrf_token": csrf_of(form), "api_key": world["keys"]["ro"]})
        page = c.get(f"/console/projects/{world['alpha']}/agents")
        assert page.status_code == 200, page.text
        made = c.post(
            f"/console/projects/{world['alpha']}/agents",
            data={"csrf_token": csrf_of(page), "name": "console_intruder", "provider": "extractive"},
        )
        assert made.status_code == 403 and made.headers["content-type"].startswith("text/html")
        assert 'role="alert"' in made.text and "read-only: creating an agent is not allowed" in made.text
    with client(app, world["keys"]["full"]) as full:
        assert full.get(f"/api/projects/{world['alpha']}/agents/console_intruder").status_code == 404


# --- a project key --------------------------------------------------------------------------------------------


def test_project_key_sees_its_project_only(app: ServedApp, world: dict[str, Any]) -> None:
    alpha, beta = world["alpha"], world["beta"]
    with client(app, world["keys"]["alpha"]) as c:
        assert [p["name"] for p in c.get("/api/projects").json()] == [alpha]
        databases = {d["name"] for d in c.get("/api/databases").json()}  # beside the system ones
        assert alpha in databases and beta not in databases and world["ds"] not in databases
        assert [a["name"] for a in c.get(f"/api/projects/{alpha}/agents").json()] == ["helper"]
        hits = c.post(f"/api/projects/{alpha}/knowledge_bases/kb/search", json={"query": "penguins"})
        assert hits.status_code == 200 and hits.json()
        # it may write in its own project
        made = c.post(f"/api/projects/{alpha}/agents", json={"agent": {"name": f"own_{world['tag']}"}})
        assert made.status_code == 201, made.text
        for path in (
            f"/api/projects/{beta}",
            f"/api/projects/{beta}/agents",
            f"/api/projects/{beta}/knowledge_bases",
            f"/api/projects/{beta}/knowledge_bases/kb",
            f"/api/projects/{beta}/knowledge_bases/kb/export",
            f"/api/databases/{beta}",
            f"/api/databases/{world['ds']}",
            "/api/files",
            f"/api/files/{world['file']}",
        ):
            assert_problem(c.get(path), 403)
        refused = c.post(f"/api/projects/{beta}/knowledge_bases/kb/search", json={"query": "penguins"})
        assert f"project {beta} is not allowed" in assert_problem(refused, 403)["detail"]
        asked = c.post(
            f"/api/projects/{beta}/agents/helper/completions",
            json={"messages": [{"question": "fastest?", "answer": None}]},
        )
        assert_problem(asked, 403)
        assert_problem(c.post("/api/projects", json={"name": f"mine_{world['tag']}"}), 403)
        # an agent of its project cannot be pointed at another project's KB, nor at data sources
        stolen = {"agent": {"name": "thief", "data": {"knowledge_bases": [f"{beta}.kb"]}}}
        assert_problem(c.post(f"/api/projects/{alpha}/agents", json=stolen), 403)
        tables = {"agent": {"name": "thief", "data": {"tables": [f"{world['ds']}.animals"]}}}
        assert_problem(c.post(f"/api/projects/{alpha}/agents", json=tables), 403)
        # inserting from uploaded files is reaching a global object too
        from_file = {"knowledge_base": {"files": [world["file"]]}}
        assert_problem(c.put(f"/api/projects/{alpha}/knowledge_bases/kb", json=from_file), 403)
        # the OpenAI-compatible models list its project's agents only
        models = {m["id"] for m in c.get("/v1/models").json()["data"]}
        assert models == {f"{alpha}.helper", f"{alpha}.own_{world['tag']}"}
        other = c.post(
            "/v1/chat/completions",
            json={"model": f"{beta}.helper", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert other.status_code == 403

        # SQL: other projects, data sources and files are refused; listings are filtered
        for statement in (
            f"SELECT * FROM {beta}.kb",
            f"SELECT answer FROM {beta}.helper WHERE question = 'fastest?'",
            f"SELECT * FROM {alpha}.kb AS a JOIN {beta}.kb AS b ON a.id = b.id",
            f"SELECT * FROM {world['ds']}.animals",
            f"SELECT * FROM files.{world['file']}",
            f"SHOW TABLES FROM {beta}",
            f"DROP AGENT {beta}.helper",
            f"CREATE AGENT {beta}.intruder USING model = 'extractive'",
            "SELECT * FROM information_schema.queries",
        ):
            answer = sql(c, statement)
            assert answer["type"] == "error" and "This API key is limited to" in answer["error_message"], (
                statement,
                answer,
            )
        databases = {row[0] for row in sql(c, "SHOW DATABASES")["data"]}
        assert alpha in databases and beta not in databases and world["ds"] not in databases
        names = sql(c, "SELECT name, project FROM information_schema.knowledge_bases")["data"]
        assert names == [["kb", alpha]]
        agents = {row[1] for row in sql(c, "SELECT name, project FROM information_schema.agents")["data"]}
        assert agents == {alpha}
        assert len(sql(c, f"SELECT * FROM {alpha}.kb")["data"]) == len(ROWS)
    with client(app, world["keys"]["full"]) as full:  # nothing reached the other project
        assert [a["name"] for a in full.get(f"/api/projects/{beta}/agents").json()] == ["helper"]
        assert "thief" not in {a["name"] for a in full.get(f"/api/projects/{alpha}/agents").json()}


async def test_project_key_over_mcp_lists_its_project_only(app: ServedApp, world: dict[str, Any]) -> None:
    http = httpx2.AsyncClient(headers=headers(world["keys"]["alpha"]), timeout=120)
    async with Client(streamable_http_client(f"{app.url}/mcp", http_client=http)) as mcp:
        listed = (await mcp.call_tool("list_knowledge_bases", {})).structured_content
        assert {kb["project"] for kb in listed["knowledge_bases"]} == {world["alpha"]}
        databases = (await mcp.call_tool("list_databases", {})).structured_content
        assert world["ds"] not in json.dumps(databases)
        other = await mcp.call_tool(
            "search_knowledge_base", {"knowledge_base": f"{world['beta']}.kb", "query": "x"}
        )
        assert other.is_error and "is not allowed" in str(other.content[0].text)
        query = await mcp.call_tool("query", {"sql": f"SELECT * FROM {world['ds']}.animals"})
        assert query.is_error and "cheetah" not in str(query.content)


def test_read_only_project_key_combines_both(app: ServedApp, world: dict[str, Any]) -> None:
    with client(app, world["keys"]["alpha_ro"]) as c:  # made with the project's name in upper case
        assert [p["name"] for p in c.get("/api/projects").json()] == [world["alpha"]]
        assert c.get(f"/api/projects/{world['alpha']}/agents").status_code == 200
        refused = c.delete(f"/api/projects/{world['alpha']}/agents/helper")
        assert READ_ONLY in assert_problem(refused, 403)["detail"]
        assert_problem(c.get(f"/api/projects/{world['beta']}/agents"), 403)


# --- beneath the routes ---------------------------------------------------------------------------------------


def test_services_refuse_for_the_principal_in_context(app: ServedApp, world: dict[str, Any]) -> None:
    """The services themselves check the scope: called directly (no route, no middleware) while the
    context holds a read-only or a project principal, they refuse; with nobody in the context (the CLI,
    the worker) they act."""

    async def work(services: Any) -> list[str]:
        refused: list[str] = []
        read_only = Principal("key", "direct", read_only=True)
        with access.entered(read_only):
            for call in (
                lambda: services.agents.delete(world["alpha"], "helper"),
                lambda: services.knowledge_bases.delete(world["alpha"], "kb"),
                lambda: services.projects.create(f"direct_{world['tag']}"),
                lambda: services.sql.execute(f"DROP AGENT {world['alpha']}.helper", "mindsdb"),
            ):
                with pytest.raises(Forbidden, match="read-only"):
                    await call()
                refused.append("read-only")
            assert await services.agents.get(world["alpha"], "helper")  # reads pass
        with access.entered(Principal("key", "direct", projects=frozenset({world["alpha"]}))):
            with pytest.raises(Forbidden, match="is not allowed"):
                await services.agents.get(world["beta"], "helper")
            with pytest.raises(Forbidden, match="is not allowed"):
                await services.search.knowledge_base(world["beta"], "kb")
            assert [p.name for p in await services.projects.list()] == [world["alpha"]]
            assert await services.data_sources.list() == []
        assert access.current() is None
        assert len(await services.projects.list()) >= 3  # nobody in the context: full access
        return refused

    from agentkb.cli.keys import with_services

    assert len(with_services(app_settings(app), work)) == 4
    assert asyncio.run(_no_principal()) is None


async def _no_principal() -> Principal | None:
    return access.current()


def test_a_project_keys_job_runs_in_the_keys_scope(app: ServedApp, world: dict[str, Any]) -> None:
    """A job acts for the key that created it: a project key's job reaches its project only, also in its
    scheduled runs (which no request carries)."""
    alpha, beta, tag = world["alpha"], world["beta"], world["tag"]
    with client(app, world["keys"]["alpha"]) as c:
        assert sql(c, f"CREATE JOB {beta}.j_{tag} (SELECT 1)")["type"] == "error"  # not its project
        own = f"SELECT id FROM {alpha}.kb WHERE content = 'penguins' LIMIT 1"
        other = f"SELECT id FROM {beta}.kb WHERE content = 'penguins' LIMIT 1"
        source = f"SELECT * FROM {world['ds']}.animals"
        for name, query in (("own", own), ("other", other), ("source", source)):
            made = c.post(
                f"/api/projects/{alpha}/jobs", json={"job": {"name": f"{name}_{tag}", "query": query}}
            )
            assert made.status_code == 200, made.text
        with client(app, world["keys"]["full"]) as full:
            deadline = time.monotonic() + 60
            while True:
                answer = sql(full, f"SELECT * FROM log.jobs_history WHERE project = '{alpha}'")
                found = [dict(zip(answer["column_names"], row, strict=True)) for row in answer["data"]]
                runs = {r["NAME"]: r for r in found if r["RUN_END"] is not None}
                if {f"own_{tag}", f"other_{tag}", f"source_{tag}"} <= set(runs):
                    break
                assert time.monotonic() < deadline, runs
                time.sleep(0.2)
    assert runs[f"own_{tag}"]["STATE"] == "succeeded", runs
    for name in (f"other_{tag}", f"source_{tag}"):
        assert runs[name]["STATE"] == "failed" and "limited to the project(s)" in runs[name]["ERROR"], runs
