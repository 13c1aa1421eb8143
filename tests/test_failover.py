"""A failover drill: agentkb on a multi-host `AGENTKB_DATABASE_URL` (a primary and its synchronous standby,
`target_session_attrs=read-write`; tests/replication.py) under a load of inserts and searches; the primary
crashes (`pg_ctl stop -m immediate`) and the standby is promoted. Requests caught by it fail with 503
problem+json and `Retry-After`, none with anything else; the service is ready again; requests sent once it
answers ready all succeed (no stale pooled connection is used); every acknowledged write is on the new
primary; an async insert that was running when the primary died is taken over and ends there.
`python -m bench failover` measures the same with `agentkb serve` processes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.failover import Load, ready_at, stored_ids, summarise
from tests.conftest import ServedApp
from tests.openai_stub import OpenAIStub
from tests.replication import ReplicaPair, replica_pair

pytestmark = pytest.mark.replication

P = "/api/projects/mindsdb"
WAIT_S = 120.0  # generous: nothing here is timed


@pytest.fixture(scope="module")
def pair() -> Iterator[ReplicaPair]:
    with replica_pair(synchronous=True) as running:
        yield running


def _job(client: httpx.Client, kb: str, job_id: str, states: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        job: dict[str, Any] = client.get(f"{P}/knowledge_bases/{kb}/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.05)


def test_failover_to_the_promoted_standby(pair: ReplicaPair, settings: Any, tmp_path: Path) -> None:
    config = settings.model_copy(
        update={"database_url": pair.multi_host_url(), "data_dir": tmp_path, "job_stale_after_s": 2}
    )
    with (
        OpenAIStub() as stub,
        OpenAIStub() as held,
        ServedApp(config) as app,
        httpx.Client(base_url=app.url, timeout=60) as client,
    ):
        for kb, source in (("drill", stub), ("held", held)):
            body = {"knowledge_base": {"name": kb, "embedding_model": source.embedding_model()}}
            assert client.post(f"{P}/knowledge_bases", json=body).status_code == 201
        table = client.get(f"{P}/knowledge_bases/drill").json()["vector_database_table"]
        # an async insert mid-job: its worker holds its lease, its embedding request is held
        held.hold()
        rows = [{"id": f"h{i}", "content": f"held row {i}"} for i in range(10)]
        r = client.put(f"{P}/knowledge_bases/held?async=true", json={"knowledge_base": {"rows": rows}})
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
        _job(client, "held", job_id, {"running"})

        load = Load([app.url], "drill", clients=4)
        load.start()
        try:
            deadline = time.monotonic() + WAIT_S
            while len(load.acknowledged) < 8:  # the load is under way
                assert time.monotonic() < deadline, load.outcomes[-3:]
                time.sleep(0.05)
            crash = time.monotonic()
            pair.stop(pair.primary, "immediate")
            pair.promote()
            ready = ready_at([app.url], crash)
            held.release()
            while load.succeeded_since(ready) < 20:  # the load goes on, on the new primary
                assert time.monotonic() < deadline + WAIT_S, load.outcomes[-3:]
                time.sleep(0.05)
        finally:
            held.release()
            load.stop()

        # the job whose worker lost the database is taken over (stale heartbeat, free lease) and ends
        job = _job(client, "held", job_id, {"succeeded", "failed", "cancelled"})
        assert job["state"] == "succeeded" and job["attempts"] == 2, job
        assert job["counts"]["documents"] == len(rows), job

        stored = stored_ids(pair.url(pair.primary), table)
        figures = summarise(load, crash, ready, stored)
        print("failover drill:", figures)
        assert figures["acknowledged lost"] == 0, figures
        assert figures["failed, not 503 + Retry-After"] == 0, figures["statuses"]
        assert figures["failed after ready"] == 0, figures
        failed = [o for o in load.outcomes if o.status != 200]
        # the database's own errors; or a synchronous insert whose heartbeat could not be recorded in time
        titles = {"Database unavailable", "Insert interrupted"}
        assert all(o.title in titles for o in failed), figures["statuses"]
