"""`GET /metrics`: Prometheus's text format, declared in the schema, and counters that move with real work —
an insert (the scripted OpenAI stub embeds), a search, an agent completion (the stub chats), a failed LLM
request, a 404 on an unknown route."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import stub_kb
from tests.openai_stub import OpenAIStub, error, text, tool_call

P = "/api/projects/mindsdb"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(client: httpx.Client) -> Samples:
    r = client.get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def test_metrics_is_declared_as_text_in_the_schema(client: httpx.Client) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/metrics"]["get"]
    assert "text/plain" in operation["responses"]["200"]["content"]
    assert operation["security"]  # not public: Prometheus sends a bearer token when auth is on


def test_counters_move_with_real_work(client: httpx.Client, unique: str) -> None:
    kb, agent = f"metrics_kb_{unique}", f"metrics_agent_{unique}"
    with OpenAIStub() as stub:
        stub_kb(client, kb, stub)
        before = scrape(client)

        rows = [{"id": i, "content": f"Fact {i}: the cheetah is fast, penguins huddle."} for i in range(3)]
        r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows}})
        assert r.status_code == 200, r.text
        r = client.post(f"{P}/knowledge_bases/{kb}/search", json={"query": "cheetah", "limit": 2})
        assert r.status_code == 200, r.text
        r = client.post(f"{P}/knowledge_bases/{kb}/search", json={"filters": {"_original_doc_id": "1"}})
        assert r.status_code == 200, r.text

        model = stub.chat_model()
        body = {"agent": {"name": agent, "model": model, "data": {"knowledge_bases": [f"mindsdb.{kb}"]}}}
        assert client.post(f"{P}/agents", json=body).status_code == 201
        stub.script(
            tool_call("kb_query_tool", f"SELECT * FROM mindsdb.{kb} WHERE content = 'cheetah' LIMIT 1"),
            text("The cheetah is fast."),
            error(401, "bad key"),
        )
        ask = {"messages": [{"question": "Which animal is fast?", "answer": ""}]}
        r = client.post(f"{P}/agents/{agent}/completions", json=ask)
        assert r.status_code == 200, r.text
        assert "cheetah" in r.text
        client.post(f"{P}/agents/{agent}/completions", json=ask)  # the stub answers 401 (not retried)
        assert client.get("/api/no/such/route").status_code == 404
        after = scrape(client)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("agentkb_ingest_documents_total") >= 3
    assert moved("agentkb_ingest_chunks_written_total") >= 3
    assert moved("agentkb_ingest_embeddings_total") >= 3
    # 3 chunks and the query 'cheetah' (the agent's tool asks it again: its vector is the one kept)
    assert moved("agentkb_embedding_texts_total", provider="openai") >= 4
    assert moved("agentkb_embedding_request_duration_seconds_count", provider="openai") >= 2
    assert moved("agentkb_query_embedding_cache_hits_total", provider="openai") >= 1
    assert moved("agentkb_search_duration_seconds_count") >= 3  # HTTP twice, the agent's tool
    assert moved("agentkb_search_duration_seconds_count", mode="hybrid") >= 1  # the HTTP default
    assert moved("agentkb_search_duration_seconds_count", mode="metadata") >= 1
    assert moved("agentkb_llm_request_duration_seconds_count", provider="openai") >= 3
    assert moved("agentkb_llm_errors_total", provider="openai") >= 1
    assert moved("agentkb_jobs_finished_total", state="succeeded") >= 1
    assert value(after, "agentkb_jobs", state="succeeded") >= 1

    # requests by route template (never the raw path) and status
    route = "/api/projects/{project_name}/knowledge_bases/{kb_name}"
    assert moved("agentkb_http_requests_total", method="PUT", route=route, status="200") >= 1
    search = route + "/search"
    assert (
        moved("agentkb_http_request_duration_seconds_count", method="POST", route=search, status="200") >= 2
    )
    assert moved("agentkb_http_requests_total", method="GET", route="<unmatched>", status="404") >= 1
    assert not any(kb in dict(labels).get("route", "") for _, labels in after)

    # the pool's gauges are read at scrape time
    assert value(after, "agentkb_db_pool_size") > 0
    assert value(after, "agentkb_db_pool_connections", state="idle") >= 1


def test_an_insert_leaves_an_index_merge_pending_until_it_settles(client: httpx.Client, unique: str) -> None:
    """Every insert schedules its chunk table's index merge, which waits for the inserts to settle (0.5 s):
    meanwhile the scrape counts it pending (a benchmark or an operator waits for 0 before timing searches)."""
    kb = f"metrics_merge_{unique}"
    with OpenAIStub() as stub:
        stub_kb(client, kb, stub)
        rows = [{"id": i, "content": f"row {i} of a small load"} for i in range(3)]
        r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows}})
        assert r.status_code == 200, r.text
        assert value(scrape(client), "agentkb_vector_index_merges_pending") >= 1
        deadline = time.monotonic() + 30
        while value(scrape(client), "agentkb_vector_index_merges_pending") > 0:
            assert time.monotonic() < deadline, "the merge never settled"
            time.sleep(0.1)


def test_worker_serves_its_metrics_on_a_port_of_its_own() -> None:
    """`agentkb worker --metrics-port` (it has no API): the same registry on a plain HTTP port."""
    from agentkb import metrics
    from tests.conftest import free_port

    port = free_port()
    metrics.serve_http(port, addr="127.0.0.1")
    r = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert r.status_code == 200
    assert "agentkb_ingest_documents_total" in r.text


def test_multiprocess_mode_sums_the_processes(tmp_path: Path) -> None:
    """With PROMETHEUS_MULTIPROC_DIR set before they start, processes share their values through that
    directory and any one renders the sum (docs/operations.md#metrics)."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    count = (
        "from agentkb import metrics; metrics.ingest_documents.inc(2); "
        "metrics.http_requests.labels('GET', '/health', '200').inc(); metrics.jobs.labels('queued').set(5)"
    )
    for _ in range(2):
        subprocess.run([sys.executable, "-c", count], env=env, check=True, timeout=120)
    render = "import sys; from agentkb import metrics; sys.stdout.write(metrics.render().decode())"
    out = subprocess.run(
        [sys.executable, "-c", render], env=env, check=True, timeout=120, capture_output=True, text=True
    ).stdout
    samples: Samples = {}
    for family in text_string_to_metric_families(out):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    assert value(samples, "agentkb_ingest_documents_total") == 4
    assert value(samples, "agentkb_http_requests_total", route="/health") == 2
    assert value(samples, "agentkb_jobs", state="queued") == 5  # the most recent value, not a sum
