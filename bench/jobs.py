"""The jobs' scheduler: how late a scheduled run starts after its tick, idle and under load.

For each count of `--jobs`, a fresh server (`agentkb serve`, `--workers` processes, the embedded PostgreSQL)
gets that many sync jobs, each `INSERT INTO kb_i SELECT id, body AS content FROM src.notes WHERE id > LAST`
every second from a SQLite data source to which a writer adds `--rows-per-s` rows (each job embeds them
with the instant stub embedder).
Two phases of `--duration` seconds: idle (only the jobs), then under load (`--clients` threads each
searching a KB and inserting 50-row batches into another, without pause). For each phase: the runs that
started in it, their lag (the run's start minus its tick: `jobs_history.RUN_START - TICK_AT`) at p50, p95
and max, their duration, and whether any tick ran twice (it must not).

    python -m bench jobs [--jobs 2,8] [--duration 20] [--clients 8] [--rows-per-s 20] [--workers 1] [--quick]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import TextGenerator, check, percentile, print_table, sql, write_result

P = "/api/projects/mindsdb"


def _when(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=dt.UTC)


def _writer(db_file: Path, rate: float, stop: threading.Event, texts: list[str]) -> None:
    """Adds rows to src.notes at `rate` per second until `stop`."""
    next_id = 1_000_000
    with sqlite3.connect(db_file) as conn:
        while not stop.wait(1.0):
            rows = [(next_id + i, texts[(next_id + i) % len(texts)]) for i in range(int(rate))]
            next_id += len(rows)
            conn.executemany("INSERT INTO notes VALUES (?, ?)", rows)
            conn.commit()


def _load(base: str, stop: threading.Event, texts: list[str], index: int, errors: list[str]) -> None:
    """One client: a search, then an insert of 50 rows, over and over."""
    with httpx.Client(base_url=base, timeout=120) as client:
        n = 0
        while not stop.is_set():
            try:
                check(
                    client.post(
                        f"{P}/knowledge_bases/load_kb/search", json={"query": texts[n % 97], "limit": 5}
                    )
                )
                rows = [
                    {"id": f"c{index}r{n}_{i}", "content": texts[(n + i) % len(texts)]} for i in range(50)
                ]
                check(client.put(f"{P}/knowledge_bases/load_kb", json={"knowledge_base": {"rows": rows}}))
            except Exception as exc:  # noqa: BLE001 - counted, the load goes on
                errors.append(str(exc)[:200])
            n += 1


def _phase(client: httpx.Client, jobs: list[str], since: dt.datetime, until: dt.datetime) -> dict[str, Any]:
    lags: list[float] = []
    durations: list[float] = []
    ticks: list[tuple[str, str]] = []
    failed = 0
    for name in jobs:
        for run in check(client.get(f"{P}/jobs/{name}/history", params={"limit": 1000})).json():
            start = _when(run["run_start"])
            if not (since <= start < until) or run["run_end"] is None:
                continue
            lags.append((start - _when(run["tick_at"])).total_seconds() * 1000)
            durations.append((_when(run["run_end"]) - start).total_seconds() * 1000)
            ticks.append((name, run["tick_at"]))
            failed += run["state"] != "succeeded"
    return {
        "runs": len(lags),
        "failed": failed,
        "ticks run twice": len(ticks) - len(set(ticks)),
        "lag p50 ms": round(percentile(lags, 50), 1) if lags else None,
        "lag p95 ms": round(percentile(lags, 95), 1) if lags else None,
        "lag max ms": round(max(lags), 1) if lags else None,
        "run p50 ms": round(percentile(durations, 50), 1) if durations else None,
    }


def _measure(
    n_jobs: int, duration: float, args: argparse.Namespace, texts: list[str]
) -> tuple[list[dict[str, Any]], int]:
    """One server with `n_jobs` jobs: the idle phase's row, the load phase's row, and the load's errors."""
    from bench.server import agentkb_server
    from bench.stubs import bench_stub

    serve_args = ["--workers", str(args.workers)] if args.workers > 1 else []
    with bench_stub() as stub, agentkb_server(args=serve_args) as server:
        base = str(server)
        source_dir = server.data_dir / "databases"  # the data-source directory (AGENTKB_DATA_SOURCE_FILE_DIR)
        source_dir.mkdir(parents=True, exist_ok=True)
        db_file = source_dir / "notes.db"
        with sqlite3.connect(db_file) as conn:
            conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
            conn.executemany("INSERT INTO notes VALUES (?, ?)", list(enumerate(texts[:100])))
        with httpx.Client(base_url=base, timeout=120) as client:
            sql(
                client,
                base,
                f'CREATE DATABASE src WITH ENGINE = \'sqlite\', PARAMETERS = {{"db_file": "{db_file}"}}',
            )
            model = stub.embedding_model()
            jobs = [f"sync_{i}" for i in range(n_jobs)]
            for name in [*(f"kb_{i}" for i in range(n_jobs)), "load_kb"]:
                check(
                    client.post(
                        f"{P}/knowledge_bases",
                        json={"knowledge_base": {"name": name, "embedding_model": model}},
                    )
                )
            for i, name in enumerate(jobs):
                sql(
                    client,
                    base,
                    f"CREATE JOB {name} (INSERT INTO kb_{i} SELECT id, body AS content FROM src.notes WHERE id > LAST) "
                    "EVERY 1 second",
                )
            stop_writer = threading.Event()
            writer = threading.Thread(
                target=_writer, args=(db_file, args.rows_per_s, stop_writer, texts), daemon=True
            )
            writer.start()
            time.sleep(3)  # the first runs load the first rows
            load_avg_idle = ", ".join(f"{x:.2f}" for x in os.getloadavg())
            idle_from = dt.datetime.now(dt.UTC)
            time.sleep(duration)
            idle_to = dt.datetime.now(dt.UTC)
            stop_load = threading.Event()
            errors: list[str] = []
            clients = [
                threading.Thread(target=_load, args=(base, stop_load, texts, i, errors), daemon=True)
                for i in range(args.clients)
            ]
            for thread in clients:
                thread.start()
            time.sleep(2)  # the load reaches its pace
            load_from = dt.datetime.now(dt.UTC)
            time.sleep(duration)
            load_to = dt.datetime.now(dt.UTC)
            load_avg_load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
            stop_load.set()
            for thread in clients:
                thread.join(timeout=120)
            stop_writer.set()
            time.sleep(2)  # the runs that started in the window end
            rows = [
                {
                    "jobs": n_jobs,
                    "phase": "idle",
                    "load average": load_avg_idle,
                    **_phase(client, jobs, idle_from, idle_to),
                },
                {
                    "jobs": n_jobs,
                    "phase": f"{args.clients} clients (search + 50-row inserts)",
                    "load average": load_avg_load,
                    **_phase(client, jobs, load_from, load_to),
                },
            ]
    return rows, len(errors)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench jobs", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--jobs", help="job counts to measure, each on a fresh server (default 2,8; --quick 2,4)"
    )
    parser.add_argument("--duration", type=float, help="seconds per phase (default 20; --quick 8)")
    parser.add_argument("--clients", type=int, default=8, help="load clients in the second phase")
    parser.add_argument("--rows-per-s", type=float, default=20.0, help="rows added to the source per second")
    parser.add_argument("--workers", type=int, default=1, help="`agentkb serve --workers`")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    counts = [int(n) for n in (args.jobs or ("2,4" if args.quick else "2,8")).split(",")]
    duration = args.duration or (8.0 if args.quick else 20.0)
    texts = TextGenerator(seed=7).texts(500, chars=300)
    rows: list[dict[str, Any]] = []
    errors = 0
    for n_jobs in counts:
        print(
            f"jobs: {n_jobs} jobs every second, {duration:g}s idle then {duration:g}s under {args.clients} clients"
        )
        measured, failed = _measure(n_jobs, duration, args, texts)
        rows += measured
        errors += failed
    print_table("jobs: lag from a tick to its run's start", rows)
    write_result(
        "jobs",
        {
            "quick": args.quick,
            "jobs": counts,
            "duration_s": duration,
            "clients": args.clients,
            "workers": args.workers,
            "load_errors": errors,
            "table": rows,
            "note": (
                "Each job: `INSERT INTO kb_i SELECT … FROM src.notes WHERE id > LAST` every second from a SQLite "
                f"source gaining {args.rows_per_s:g} rows/s, embedded by the instant stub; `serve --workers "
                f"{args.workers}` (a process runs at most AGENTKB_JOB_RUN_CONCURRENCY = 4 runs at once). "
                f"Load-phase client errors: {errors}."
            ),
        },
    )
