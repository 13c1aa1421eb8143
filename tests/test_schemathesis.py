"""Property-based runs of every operation in /openapi.json against the served app, with valid and invalid
inputs: no 5xx, and every response is documented — its status code, its media type and its body's schema
(`application/problem+json` errors, `text/event-stream` events included).

`test_responses_conform` generates every parameter, so most paths name nothing that exists (404s);
`test_responses_conform_for_existing_resources` fixes the path parameters to a freshly made project,
knowledge base, agent, trace, ingestion job, file and data source, so success bodies are checked too.

The cases come from schemathesis's public strategies (`APIOperation.as_strategy`) under plain Hypothesis,
not from schemathesis's pytest plugin, whose test wrapper breaks under pytest 9.2 ('Function' object has
no attribute '_nodeid'); so this runs the same with any pytest."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.helpers import stub_kb
from tests.openai_stub import OpenAIStub

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
MAX_EXAMPLES = 30
METHODS = ("get", "put", "post", "delete", "patch")
INT64 = range(-(2**63), 2**63)
AGENTS = "/api/projects/{project_name}/agents"
KBS = "/api/projects/{project_name}/knowledge_bases"
KB = KBS + "/{kb_name}"


def _spec() -> dict[str, Any]:
    """The app's own OpenAPI document (no server or database needed), to list the operations."""
    from agentkb.app import create_app
    from agentkb.settings import Settings

    return create_app(Settings(database_url="postgresql://unused/unused", data_dir=Path("unused"))).openapi()


SPEC = _spec()
OPERATIONS = [f"{m.upper()} {path}" for path, item in SPEC["paths"].items() for m in item if m in METHODS]
WITH_PATH_PARAMETERS = [label for label in OPERATIONS if "{" in label]


@pytest.fixture(scope="session")
def api_schema(base_url: str) -> Any:
    return schemathesis.openapi.from_url(f"{base_url}/openapi.json")


def _framing_headers(case: Any) -> list[str]:
    """Headers the generator made up that frame the HTTP message itself (`content-length: vOi/`): the HTTP
    server answers such a request before the app sees it (uvicorn's 400 `Invalid HTTP request received.`, in
    text/plain), so it checks nothing of the API."""
    return [name for name in case.headers or {} if name.lower() in ("content-length", "transfer-encoding")]


def _body_examples(label: str) -> list[Any]:
    method, path = label.split(" ", 1)
    content = SPEC["paths"][path][method.lower()].get("requestBody", {}).get("content", {})
    return list(content.get("application/json", {}).get("schema", {}).get("examples", []))


def _run(
    api_schema: Any,
    base_url: str,
    label: str,
    mode: GenerationMode,
    path_parameters: dict[str, str] | None = None,
) -> None:
    operation = api_schema.find_operation_by_label(label)
    assert operation is not None, f"{label} is not in the served /openapi.json"
    if path_parameters is not None:
        path_parameters = {p.name: path_parameters[p.name] for p in operation.path_parameters}

    @given(case=operation.as_strategy(generation_mode=mode, path_parameters=path_parameters))
    @settings(
        max_examples=MAX_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    def run(case: Any) -> None:
        assume(not _framing_headers(case))
        case.call_and_validate(base_url=base_url, checks=CHECKS)

    if mode is GenerationMode.POSITIVE and path_parameters is not None:
        for body in _body_examples(label):  # the documented request, e.g. a question an agent can answer
            run = example(
                case=operation.Case(path_parameters=path_parameters, body=body, media_type="application/json")
            )(run)
    try:
        run()
    except Unsatisfiable:
        if mode is not GenerationMode.NEGATIVE:
            raise
        pytest.skip(f"{label} has nothing else that can be made invalid")


@pytest.mark.parametrize("mode", list(GenerationMode), ids=str)
@pytest.mark.parametrize("label", OPERATIONS)
def test_responses_conform(api_schema: Any, base_url: str, label: str, mode: GenerationMode) -> None:
    _run(api_schema, base_url, label, mode)


@pytest.fixture()
def existing(client: httpx.Client, unique: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Path parameters naming real resources, made afresh for each test (the run may delete them)."""
    with OpenAIStub() as stub:
        project, kb, agent = f"st_{unique}", f"kb_{unique}", f"agent_{unique}"
        assert client.post("/api/projects", json={"name": project}).status_code == 201
        base = f"/api/projects/{project}"
        stub_kb(client, kb, stub, project=project)
        rows = [{"id": i, "content": f"Fact {i}: the cheetah is fast, penguins huddle."} for i in range(3)]
        inserted = client.put(f"{base}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows}})
        assert inserted.status_code == 200, inserted.text
        data = {"knowledge_bases": [f"{project}.{kb}"]}
        r = client.post(f"{base}/agents", json={"agent": {"name": agent, "data": data}})
        assert r.status_code == 201, r.text
        answer = client.post(
            f"{base}/agents/{agent}/completions",
            json=_body_examples("POST /api/projects/{project_name}/agents/{agent_name}/completions")[0],
        )
        assert answer.status_code == 200, answer.text
        file_name = f"file_{unique}"
        r = client.put(
            f"/api/files/{file_name}",
            files={"file": ("facts.csv", b"a,b\n1,2\n")},
            data={"original_file_name": "facts.csv", "source_type": "file"},
        )
        assert r.status_code == 200, r.text
        lite = tmp_path / "lite.db"
        with sqlite3.connect(lite) as conn:
            conn.execute("CREATE TABLE facts (id INTEGER, fact TEXT)")
        database = f"lite_{unique}"
        r = client.post(
            "/api/databases",
            json={"database": {"name": database, "engine": "sqlite", "parameters": {"db_file": str(lite)}}},
        )
        assert r.status_code == 201, r.text
        qa = [{"question": "Which animal is fast?", "doc_id": 0}]
        r = client.put(f"/api/files/qa_{unique}", files={"file": ("qa.json", json.dumps(qa).encode())})
        assert r.status_code == 200, r.text
        run = client.post(f"{base}/knowledge_bases/{kb}/evaluate", json={"test_table": f"files.qa_{unique}"})
        assert run.status_code == 200, run.text
        job = {
            "name": f"job_{unique}",
            "query": "SELECT 1",
            "start_at": "2999-01-01",
            "schedule_str": "every 1 day",
        }
        r = client.post(f"{base}/jobs", json={"job": job})
        assert r.status_code == 200, r.text
        yield {
            "job_name": job["name"],
            "evaluation_id": str(run.json()["evaluation"]["id"]),
            "project_name": project,
            "kb_name": kb,
            "agent_name": agent,
            "trace_id": answer.json()["message"]["trace_id"],
            "job_id": inserted.headers["x-agentkb-job"],
            "name": file_name,
            "database_name": database,
        }


@pytest.mark.parametrize("mode", list(GenerationMode), ids=str)
@pytest.mark.parametrize("label", WITH_PATH_PARAMETERS)
def test_responses_conform_for_existing_resources(
    api_schema: Any, base_url: str, existing: dict[str, str], label: str, mode: GenerationMode
) -> None:
    _run(api_schema, base_url, label, mode, path_parameters=existing)
