"""Failover drill: a PostgreSQL primary stops under load and its streaming standby is promoted; how long
the agentkb servers (pointed at both with a multi-host `AGENTKB_DATABASE_URL`,
`target_session_attrs=read-write`) take to be ready again, which requests fail and how, whether an
acknowledged write is lost, and when an async ingestion job that was running resumes on the new primary.

Each round: a primary and a standby from the wheel's binaries (tests/replication.py), `--servers` `agentkb
serve` processes (each with its in-process worker), `--clients` threads each alternating a synchronous
one-row insert and a search through the servers in turn. An async insert is held mid-job (its embedding
request held by a stub). After `--before-s`, the primary is stopped and the standby promoted (`pg_ctl
promote`); `/health/ready` is polled on every server; the held job is released; the load runs `--after-s`
more. Then every acknowledged row is looked for on the new primary. `--modes`: the rounds' replication and
stop, each `--rounds` times: `synchronous:immediate` (commits wait for the standby; the primary crashes:
`pg_ctl stop -m immediate`) and `asynchronous:fast` (a clean stop, which first sends the standby all WAL).

    python -m bench failover [--rounds 3] [--modes synchronous:immediate,asynchronous:fast] [--servers 2]
                             [--clients 8] [--before-s 3] [--after-s 5] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import psycopg

from bench.common import print_table, write_result

if TYPE_CHECKING:
    from bench.server import Server

P = "/api/projects/mindsdb"
WAIT_S = 300.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """One request of the load: when it was sent and answered (monotonic), what, and how it ended."""

    sent: float
    answered: float
    kind: str  # insert | search
    status: int  # 0: no HTTP answer (the connection to the server failed)
    retry_after: str | None = None
    title: str | None = None


@dataclass
class Load:
    """`clients` threads, each sending to the servers in turn a synchronous insert of one row (its id
    acknowledged on 200) and a search of `kb`, until `stop()`."""

    bases: list[str]
    kb: str
    clients: int = 4
    acknowledged: set[str] = field(default_factory=set)
    outcomes: list[Outcome] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        for index in range(self.clients):
            thread = threading.Thread(target=self._client, args=(index,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)

    def _client(self, index: int) -> None:
        clients = [httpx.Client(base_url=base, timeout=60) for base in self.bases]
        n = 0
        try:
            while not self._stop.is_set():
                client = clients[n % len(clients)]
                row_id = f"c{index}n{n}"
                rows = [{"id": row_id, "content": f"client {index} row {n}: otters hold hands"}]
                self._send(client, "insert", "PUT", f"{P}/knowledge_bases/{self.kb}", row_id, {
                    "knowledge_base": {"rows": rows}
                })  # fmt: skip
                self._send(client, "search", "POST", f"{P}/knowledge_bases/{self.kb}/search", None, {
                    "query": "otters", "limit": 5
                })  # fmt: skip
                n += 1
        finally:
            for client in clients:
                client.close()

    def _send(
        self, client: httpx.Client, kind: str, method: str, path: str, row_id: str | None, body: Any
    ) -> None:
        sent = time.monotonic()
        try:
            r = client.request(method, path, json=body)
        except httpx.HTTPError:
            outcome = Outcome(sent, time.monotonic(), kind, 0)
        else:
            title = None
            if r.status_code != 200 and r.headers.get("content-type", "").startswith("application/problem"):
                title = r.json().get("title")
            outcome = Outcome(
                sent, time.monotonic(), kind, r.status_code, r.headers.get("retry-after"), title
            )
            if kind == "insert" and r.status_code == 200 and row_id is not None:
                with self._lock:
                    self.acknowledged.add(row_id)
        with self._lock:
            self.outcomes.append(outcome)

    def succeeded_since(self, moment: float) -> int:
        with self._lock:
            return sum(1 for o in self.outcomes if o.sent >= moment and o.status == 200)


def ready_at(bases: list[str], since: float) -> float:
    """The moment (monotonic) every server's `/health/ready` had answered 200, polled from `since`."""
    pending = set(bases)
    last = since
    with httpx.Client(timeout=5) as client:
        while pending:
            for base in sorted(pending):
                try:
                    if client.get(f"{base}/health/ready").status_code == 200:
                        pending.discard(base)
                        last = time.monotonic()
                except httpx.HTTPError:
                    pass
            if time.monotonic() - since > WAIT_S:
                raise TimeoutError(f"not ready after {WAIT_S:g} s: {sorted(pending)}")
            if pending:
                time.sleep(0.02)
    return last


def stored_ids(url: str, table: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return {str(row[0]) for row in conn.execute(f"SELECT DISTINCT doc_id FROM {table}")}


def summarise(load: Load, crash: float, ready: float, stored: set[str]) -> dict[str, Any]:
    """What the load saw around the failover (`crash`: the primary's stop began; `ready`: every server
    answered ready)."""
    failed = [o for o in load.outcomes if o.status != 200]
    not_503 = [o for o in failed if o.status != 503 or o.retry_after is None]
    after_ready = [o for o in load.outcomes if o.sent >= ready]
    first_ok = min((o.answered for o in load.outcomes if o.sent >= crash and o.status == 200), default=None)
    return {
        "requests": len(load.outcomes),
        "failed": len(failed),
        "failed, not 503 + Retry-After": len(not_503),
        "failed after ready": sum(1 for o in after_ready if o.status != 200),
        "failed sent before the crash": sum(1 for o in failed if o.sent < crash),
        "ready after crash s": round(ready - crash, 2),
        "first success after crash s": round(first_ok - crash, 2) if first_ok is not None else None,
        "last failure after crash s": round(max(o.answered for o in failed) - crash, 2) if failed else None,
        "writes acknowledged": len(load.acknowledged),
        "acknowledged lost": len(load.acknowledged - stored),
        "statuses": sorted({f"{o.status} {o.title or ''}".strip() for o in failed}),
    }


# -- the benchmark's round: agentkb serve processes --------------------------------------------------------


@contextmanager
def _servers(count: int, env: dict[str, str]) -> Iterator[list[Server]]:
    from bench.server import agentkb_server

    with ExitStack() as stack:
        yield [stack.enter_context(agentkb_server(env=env)) for _ in range(count)]


def _keep_logs(servers: list[Server], label: str) -> list[str]:
    """Copies of the servers' logs (their data directories are removed at the end)."""
    kept = []
    for index, server in enumerate(servers):
        path = Path(tempfile.gettempdir()) / f"agentkb-failover-{label}-server{index}.log"
        shutil.copyfile(server.log_path, path)
        kept.append(str(path))
    return kept


def _wait_job(client: httpx.Client, kb: str, job_id: str, states: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        job: dict[str, Any] = client.get(f"{P}/knowledge_bases/{kb}/jobs/{job_id}").json()
        if job.get("state") in states:
            return job
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id}: {job}")
        time.sleep(0.1)


def _round(args: argparse.Namespace, replication: str, stop: str) -> dict[str, Any]:
    from cryptography.fernet import Fernet

    from tests.openai_stub import OpenAIStub
    from tests.replication import replica_pair

    with (
        replica_pair(synchronous=replication == "synchronous") as pair,
        OpenAIStub() as stub,
        OpenAIStub() as held,
    ):
        env = {
            "AGENTKB_DATABASE_URL": pair.multi_host_url(),
            "AGENTKB_SECRET_KEY": Fernet.generate_key().decode(),
            "AGENTKB_JOB_HEARTBEAT_S": "0.5",
            "AGENTKB_JOB_STALE_AFTER_S": "3",
            "AGENTKB_DB_POOL_SIZE": "5",
        }
        with _servers(args.servers, env) as servers, httpx.Client(base_url=servers[0], timeout=60) as client:
            bases = [str(server) for server in servers]
            for kb, source in (("drill", stub), ("held", held)):
                body = {"knowledge_base": {"name": kb, "embedding_model": source.embedding_model()}}
                assert client.post(f"{P}/knowledge_bases", json=body).status_code == 201
            table = client.get(f"{P}/knowledge_bases/drill").json()["vector_database_table"]
            held.hold()
            rows = [{"id": f"h{i}", "content": f"held row {i}"} for i in range(20)]
            r = client.put(f"{P}/knowledge_bases/held?async=true", json={"knowledge_base": {"rows": rows}})
            job_id = r.json()["job_id"]
            _wait_job(client, "held", job_id, {"running"})
            load = Load(bases, "drill", args.clients)
            load.start()
            time.sleep(args.before_s)
            crash = time.monotonic()
            pair.stop(pair.primary, stop)
            stopped = time.monotonic()
            pair.promote()
            promoted = time.monotonic()
            ready = ready_at(bases, crash)
            held.release()
            job = _wait_job(client, "held", job_id, {"succeeded", "failed", "cancelled"})
            resumed = time.monotonic()
            time.sleep(args.after_s)
            load.stop()
            stored = stored_ids(pair.url(pair.primary), table)
            figures = summarise(load, crash, ready, stored)
            if figures["failed, not 503 + Retry-After"] or figures["failed after ready"]:
                figures["logs"] = _keep_logs(servers, time.strftime("%H%M%S"))
        return {
            "replication": replication,
            "stop": stop,
            "primary stop s": round(stopped - crash, 2),
            "promote s": round(promoted - stopped, 2),
            **figures,
            "held job": f"{job['state']} after {job.get('attempts')} attempts",
            "held job done after ready s": round(resumed - ready, 2),
        }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench failover", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, help="failovers, each on a fresh pair (default 3; --quick 1)")
    parser.add_argument("--servers", type=int, default=2, help="agentkb serve processes")
    parser.add_argument("--clients", type=int, help="load threads (default 8; --quick 4)")
    parser.add_argument(
        "--modes",
        default="synchronous:immediate,asynchronous:fast",
        help="replication:stop pairs (replication synchronous|asynchronous, stop immediate|fast)",
    )
    parser.add_argument("--before-s", type=float, default=3.0, help="load before the crash")
    parser.add_argument("--after-s", type=float, default=5.0, help="load after the held job ended")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.clients = args.clients or (4 if args.quick else 8)
    modes = [tuple(mode.split(":")) for mode in args.modes.split(",")]
    for replication, stop in modes:
        if replication not in ("synchronous", "asynchronous") or stop not in ("immediate", "fast"):
            parser.error(f"--modes: {replication}:{stop} is not replication:stop")
    load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    rows = []
    for replication, stop in modes:
        for index in range(args.rounds):
            print(f"failover: {replication} replication, {stop} stop, round {index + 1} of {args.rounds}")
            rows.append({"round": index + 1, **_round(args, replication, stop)})
    print_table("failover: a primary stopped and its standby promoted under load", rows)
    summary = []
    for replication, stop in modes:
        mine = [row for row in rows if (row["replication"], row["stop"]) == (replication, stop)]
        ready = [row["ready after crash s"] for row in mine]
        summary.append(
            {
                "replication": replication,
                "stop": stop,
                "rounds": len(mine),
                "ready after crash s, median": round(statistics.median(ready), 2),
                "max": round(max(ready), 2),
                "requests failed": sum(row["failed"] for row in mine),
                "of them not 503 + Retry-After": sum(row["failed, not 503 + Retry-After"] for row in mine),
                "writes acknowledged": sum(row["writes acknowledged"] for row in mine),
                "acknowledged lost": sum(row["acknowledged lost"] for row in mine),
            }
        )
    print_table("failover: summary", summary)
    write_result(
        "failover",
        {
            "quick": args.quick,
            "rounds": args.rounds,
            "modes": args.modes,
            "servers": args.servers,
            "clients": args.clients,
            "load_average_before": load_before,
            "load_average_after": ", ".join(f"{x:.2f}" for x in os.getloadavg()),
            "table": summary,
            "details": rows,
            "note": (
                f"{args.servers} `agentkb serve` processes (in-process worker on) with a multi-host "
                "AGENTKB_DATABASE_URL (target_session_attrs=read-write, connect_timeout=5); "
                f"{args.clients} clients, each a 1-row synchronous insert then a search, round robin over the "
                "servers; the primary stopped with `pg_ctl stop -m <stop>`, the standby promoted with `pg_ctl "
                "promote`. Failed: requests answered other than 200 (in flight at the crash, or sent before the "
                "servers reconnected). All on one machine, over loopback."
            ),
        },
    )
