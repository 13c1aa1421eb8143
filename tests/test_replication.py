"""A real streaming replica as `AGENTKB_DATABASE_READ_URL` (tests/replication.py: a primary and a hot
standby from the wheel's binaries, one pair for the module): searches and KB listings read the standby;
`X-Agentkb-Read-Your-Writes: true` reads this process's writes while the standby's replay is paused; a
standby lagging past `AGENTKB_READ_REPLICA_MAX_LAG_S`, or stopped, is bypassed (reads go to the primary,
never an error) and used again once it is back."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ServedApp
from tests.openai_stub import OpenAIStub
from tests.replication import ReplicaPair, replica_pair

pytestmark = pytest.mark.replication

P = "/api/projects/mindsdb"
RYW = {"X-Agentkb-Read-Your-Writes": "true"}
WAIT_S = 120.0  # generous: nothing here is timed


@pytest.fixture(scope="module")
def pair() -> Iterator[ReplicaPair]:
    with replica_pair() as running:
        yield running


@pytest.fixture()
def settings_for(settings: Any, pair: ReplicaPair, tmp_path: Path) -> Any:
    def make(**update: Any) -> Any:
        return settings.model_copy(
            update={
                "database_url": pair.url(pair.primary),
                "database_read_url": pair.url(pair.standby),
                "data_dir": tmp_path,
                **update,
            }
        )

    return make


def _ids(client: httpx.Client, kb: str, headers: dict[str, str] | None = None) -> set[str]:
    r = client.post(
        f"{P}/knowledge_bases/{kb}/search", json={"query": "otters", "limit": 100}, headers=headers
    )
    assert r.status_code == 200, r.text
    return {str(hit["id"]) for hit in r.json()}


def _kbs(client: httpx.Client, headers: dict[str, str] | None = None) -> set[str]:
    r = client.get(f"{P}/knowledge_bases", headers=headers)
    assert r.status_code == 200, r.text
    return {kb["name"] for kb in r.json()}


def _insert(client: httpx.Client, kb: str, ids: range) -> None:
    rows = [{"id": f"r{i}", "content": f"Fact {i}: otters float on their backs."} for i in ids]
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows}})
    assert r.status_code == 200, r.text


def _create(client: httpx.Client, stub: OpenAIStub, kb: str) -> None:
    body = {"knowledge_base": {"name": kb, "embedding_model": stub.embedding_model()}}
    r = client.post(f"{P}/knowledge_bases", json=body)
    assert r.status_code == 201, r.text


def _metric(client: httpx.Client, name: str) -> float:
    text = client.get("/metrics").text
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def _wait_metric(client: httpx.Client, name: str, value: float) -> None:
    deadline = time.monotonic() + WAIT_S
    while _metric(client, name) != value:
        assert time.monotonic() < deadline, f"{name} never became {value}"
        time.sleep(0.1)


def test_reads_come_from_the_standby_unless_the_caller_reads_its_writes(
    pair: ReplicaPair, settings_for: Any, stub: OpenAIStub
) -> None:
    with (
        ServedApp(settings_for(read_replica_max_lag_s=3600)) as app,
        httpx.Client(base_url=app.url, timeout=60) as client,
    ):
        _create(client, stub, "tides")
        _insert(client, "tides", range(4))
        pair.wait_replayed()
        assert _ids(client, "tides") == {"r0", "r1", "r2", "r3"}
        assert "tides" in _kbs(client)

        pair.pause_replay()
        try:
            _insert(client, "tides", range(4, 8))  # written on the primary, not replayed on the standby
            _create(client, stub, "moons")
            # plain reads come from the standby, as it was when its replay stopped
            assert _ids(client, "tides") == {"r0", "r1", "r2", "r3"}
            assert "moons" not in _kbs(client)
            # a caller reading its writes gets the primary's answer: every row written, the new KB
            assert _ids(client, "tides", RYW) == {f"r{i}" for i in range(8)}
            assert "moons" in _kbs(client, RYW)
            assert _metric(client, 'agentkb_read_replica_bypassed_total{reason="read_your_writes"}') >= 2
            bad = client.get(f"{P}/knowledge_bases", headers={"X-Agentkb-Read-Your-Writes": "maybe"})
            assert bad.status_code == 400, bad.text
        finally:
            pair.resume_replay()
        pair.wait_replayed()
        assert _ids(client, "tides") == {f"r{i}" for i in range(8)}  # the standby has caught up
        assert "moons" in _kbs(client)
        # a search of a KB whose chunk table the standby has not replayed yet is answered by the primary (it
        # used to be a 404: the missing table read as a dropped KB)
        pair.pause_replay()
        try:
            _create(client, stub, "fresh")
            _insert(client, "fresh", range(2))
            assert _ids(client, "fresh") == {"r0", "r1"}
        finally:
            pair.resume_replay()


def test_a_lagging_standby_is_bypassed_until_it_catches_up(
    pair: ReplicaPair, settings_for: Any, stub: OpenAIStub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentkb.replica")
    with (
        ServedApp(settings_for(read_replica_max_lag_s=1)) as app,
        httpx.Client(base_url=app.url, timeout=60) as client,
    ):
        _create(client, stub, "lagging")
        _insert(client, "lagging", range(2))
        pair.wait_replayed()
        _wait_metric(client, "agentkb_read_replica_usable", 1)
        pair.pause_replay()
        try:
            _insert(client, "lagging", range(2, 4))
            _wait_metric(client, "agentkb_read_replica_usable", 0)  # past the bound: bypassed
            assert _ids(client, "lagging") == {"r0", "r1", "r2", "r3"}  # the primary answers
            assert _metric(client, 'agentkb_read_replica_bypassed_total{reason="lagging"}') >= 1
            assert "read replica bypassed" in caplog.text
        finally:
            pair.resume_replay()
        _wait_metric(client, "agentkb_read_replica_usable", 1)
        assert "read replica back in use" in caplog.text
        assert _ids(client, "lagging") == {"r0", "r1", "r2", "r3"}


def test_a_stopped_standby_is_bypassed_then_used_again(
    pair: ReplicaPair, settings_for: Any, stub: OpenAIStub
) -> None:
    with (
        ServedApp(settings_for()) as app,
        httpx.Client(base_url=app.url, timeout=60) as client,
    ):
        _create(client, stub, "outage")
        _insert(client, "outage", range(3))
        pair.wait_replayed()
        assert _ids(client, "outage") == {"r0", "r1", "r2"}
        pair.stop(pair.standby)
        try:
            for _ in range(5):  # the first may meet a connection the standby dropped: retried on the primary
                assert _ids(client, "outage") == {"r0", "r1", "r2"}
                assert "outage" in _kbs(client)
            assert _metric(client, "agentkb_read_replica_usable") == 0
            assert _metric(client, 'agentkb_read_replica_bypassed_total{reason="unreachable"}') >= 1
            _insert(client, "outage", range(3, 5))  # writes go on
        finally:
            pair.start(pair.standby)
        pair.wait_replayed()
        _wait_metric(client, "agentkb_read_replica_usable", 1)
        assert _ids(client, "outage") == {f"r{i}" for i in range(5)}
