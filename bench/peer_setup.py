"""The peer benchmark's setup on either server (`bench.peer` and `bench.peer_clients` both use it): the KB and
the agent it creates, the rows it inserts, and dropping them again."""

from __future__ import annotations

import time
from typing import Any

import httpx

from bench.common import check
from tests.openai_stub import OpenAIStub

PROJECT = "mindsdb"
KB = "bench_peer_kb"
AGENT = "bench_peer_agent"


def drop(client: httpx.Client, base: str) -> None:
    """The benchmark's agent and KB deleted, where they exist."""
    client.delete(f"{base}/api/projects/{PROJECT}/agents/{AGENT}")
    client.delete(f"{base}/api/projects/{PROJECT}/knowledge_bases/{KB}")


def create_kb(client: httpx.Client, kbs: str, embedding_model: dict[str, Any]) -> float:
    """The benchmark's KB (`id`, `body` as content, `topic` as metadata) at the KB collection `kbs`; ms taken."""
    started = time.perf_counter()
    check(
        client.post(
            kbs,
            json={
                "knowledge_base": {
                    "name": KB,
                    "embedding_model": embedding_model,
                    "id_column": "id",
                    "content_columns": ["body"],
                    "metadata_columns": ["topic"],
                }
            },
        ),
        "create KB",
    )
    return round((time.perf_counter() - started) * 1000, 2)


def insert(client: httpx.Client, kbs: str, rows: list[dict[str, Any]], batch: int, what: str) -> list[float]:
    """`rows` into the KB, `batch` a PUT; each PUT's seconds."""
    puts: list[float] = []
    for start in range(0, len(rows), batch):
        t = time.perf_counter()
        check(client.put(f"{kbs}/{KB}", json={"knowledge_base": {"rows": rows[start : start + batch]}}), what)
        puts.append(time.perf_counter() - t)
    return puts


def create_agent(client: httpx.Client, agents: str, stub: OpenAIStub) -> None:
    """The agent over the KB, its model the scripted stub LLM (`chat_script`)."""
    check(
        client.post(
            agents,
            json={
                "agent": {
                    "name": AGENT,
                    "model": stub.chat_model(),
                    "data": {"knowledge_bases": [f"{PROJECT}.{KB}"], "tables": []},
                }
            },
        ),
        "create agent",
    )


MERGES_PENDING = "agentkb_vector_index_merges_pending"


def settle(
    client: httpx.Client, base: str, *, quiet_reads: int = 5, timeout_s: float = 1800.0
) -> float | None:
    """Seconds until agentkb's background HNSW index merges are done: its `/metrics` read 0 pending merges
    `quiet_reads` times in a row (with `serve --workers`, each read reaches one of the processes); None for a
    server without that metric (MindsDB indexes within its inserts). Searches timed after it measure the
    indexed KB, not the KB while its index builds beside them."""
    started = time.perf_counter()
    quiet = 0
    while quiet < quiet_reads:
        r = client.get(f"{base}/metrics")
        found = gauge_value(r.text, MERGES_PENDING) if r.is_success else None
        if found is None:
            return None
        quiet = quiet + 1 if found == 0 else 0
        if time.perf_counter() - started > timeout_s:
            raise RuntimeError(f"{base}: index merges still pending after {timeout_s:.0f} s")
        time.sleep(0.05 if quiet else 0.2)
    return round(time.perf_counter() - started, 3)


def gauge_value(exposition: str, name: str) -> float | None:
    """The value of the unlabelled sample `name` in a Prometheus text exposition (prometheus-client's parser:
    comments, labels, exemplars and timestamps as the format has them); None when it has none."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        families = list(text_string_to_metric_families(exposition))
    except ValueError:  # not an exposition (MindsDB answers /metrics otherwise)
        return None
    return next((s.value for f in families for s in f.samples if s.name == name and not s.labels), None)
