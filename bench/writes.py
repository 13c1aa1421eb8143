"""The write path with the instant stub embedder: insert speed, re-insert speed, and memory over a long insert.

(1) insert `--rows` rows (default 2,000, ~500 characters each, as `bench peer`) into a new knowledge base in
    PUTs of `--batch` (1,000): rows/s, and CPU seconds of the server's Python and of its PostgreSQL;
(2) re-insert the same rows unchanged (nothing embedded, nothing rewritten): rows/s and CPU;
(3) a long insert of `--long-rows` rows (default 100,000; --quick 20,000) in PUTs of `--batch`, the rows
    generated as they are sent, while the server's and PostgreSQL's resident memory (RSS, summed) is sampled
    every 0.2 s: peak RSS after 10 %, 50 % and 100 % of the rows, and the server process's alone. Bounded
    memory means the peak stops growing with the rows inserted (PostgreSQL's part grows with the shared
    buffers its processes touch, up to `shared_buffers`).

(4) with `--select-rows N`: the same as one statement, `INSERT INTO kb SELECT * FROM files.big` over an
    uploaded CSV of N generated rows (one transaction, batches streamed from the file), with the peak RSS
    of the server process alone and of the server with PostgreSQL (whose processes each count the shared
    buffers they touched).
(5) with `--source-rows N`: one `INSERT INTO kb SELECT id, body, topic FROM src.big` from a PostgreSQL data
    source (a table of N generated rows in a database `sources` of the server's own embedded PostgreSQL,
    attached with `CREATE DATABASE … WITH ENGINE = 'postgres'`): the rows stream from the source in batches.
    The server's RSS is sampled every 0.2 s; its peak over the first 10 %, 50 % and all of the statement's
    time is reported, with the rows embedded by then (the stub's count: the statement is one transaction).

Each PUT is one transaction; its chunks land outside the HNSW index (merged in the background), so (3)
also shows what merges cost in memory while inserts go on.

    python -m bench writes [--rows 2000] [--batch 1000] [--long-rows 100000] [--select-rows N]
                           [--source-rows N] [--quick] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as dt
import io
import json
import os
import threading
import time
from typing import Any

import httpx
import psutil

from bench.common import CACHE, TextGenerator, print_table, rate, sql, write_result
from bench.ingest import create_kb, insert, make_rows
from bench.server import Server, agentkb_server, cpu_delta, cpu_seconds, py_spy
from bench.stubs import bench_stub
from tests.openai_stub import OpenAIStub

SEED = 41


def rss_mb(server: Server) -> float:
    """Resident memory of the server process and of its PostgreSQL processes, in MB."""
    total = 0
    marker = str(server.data_dir / "pg")
    processes = [psutil.Process(server.pid)]
    for p in psutil.process_iter(attrs=("name", "cmdline")):
        if p.info["name"] == "postgres" and marker in " ".join(p.info["cmdline"] or []):
            processes += [p, *p.children(recursive=True)]
    for p in {p.pid: p for p in processes}.values():
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return round(total / 2**20, 1)


def server_rss_mb(server: Server) -> float:
    with contextlib.suppress(psutil.Error):
        return round(psutil.Process(server.pid).memory_info().rss / 2**20, 1)
    return 0.0


class Sampler:
    """The peaks of `rss_mb(server)` and of `server_rss_mb(server)`, sampled in a thread every 0.2 s."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.peak = 0.0
        self.server_peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, rss_mb(self.server))
            self.server_peak = max(self.server_peak, server_rss_mb(self.server))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench writes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=1000, help="rows per PUT")
    parser.add_argument(
        "--long-rows", type=int, help="rows of the memory run (default 100,000; --quick 20,000)"
    )
    parser.add_argument("--select-rows", type=int, help="rows of an INSERT ... SELECT over an uploaded CSV")
    parser.add_argument(
        "--source-rows", type=int, help="rows of an INSERT ... SELECT from a PostgreSQL data source"
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--profile", action="store_true", help="py-spy the server into bench/.cache/profiles/"
    )
    args = parser.parse_args(argv)
    long_n = args.long_rows or (20_000 if args.quick else 100_000)
    load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    profiles = CACHE / "profiles" if args.profile else None
    rows = make_rows(TextGenerator(seed=SEED).texts(args.rows))
    out: dict[str, Any] = {}
    table: list[dict[str, Any]] = []
    with bench_stub() as stub, agentkb_server() as base, httpx.Client(timeout=1800) as client:
        kbs = base.kbs
        create_kb(client, kbs, "warm", stub.embedding_model())
        insert(client, kbs, "warm", rows[:8], args.batch)
        create_kb(client, kbs, "writes", stub.embedding_model())
        for phase in ("insert", "reinsert"):
            cpu = cpu_seconds(base)
            with py_spy(base.pid, profiles and profiles / f"writes-{phase}-{stamp}.txt"):
                seconds, counts = insert(client, kbs, "writes", rows, args.batch)
            used = cpu_delta(cpu, cpu_seconds(base))
            out[phase] = {"rows": args.rows, "seconds": round(seconds, 3), "counts": counts, **used}
            table.append(
                {
                    "phase": f"({'1' if phase == 'insert' else '2'}) {phase}, PUTs of {args.batch:,}",
                    "rows": f"{args.rows:,}",
                    "wall_s": round(seconds, 3),
                    "rows_per_s": rate(args.rows, seconds),
                    "cpu_s": f"{used['server_python_cpu_s']} + pg {used['postgres_cpu_s']}",
                    "server counts": ", ".join(f"{k}={v}" for k, v in counts.items() if v),
                }
            )
            print(f"{table[-1]['phase']}: {seconds:.2f}s, {used}", flush=True)

        create_kb(client, kbs, "long", stub.embedding_model())
        peaks: list[tuple[int, float]] = []
        started = time.perf_counter()
        cpu = cpu_seconds(base)
        with Sampler(base) as sampler:
            done = 0
            marks = {max(long_n // 10, 1), max(long_n // 2, 1), long_n}
            while done < long_n:
                n = min(args.batch, long_n - done)
                texts = TextGenerator(seed=SEED + 1 + done // args.batch).texts(n)  # new text every batch
                batch = [{**r, "id": done + i} for i, r in enumerate(make_rows(texts))]
                insert(client, kbs, "long", batch, args.batch)
                done += n
                if any(done >= m > done - n for m in marks):
                    peaks.append((done, sampler.peak, sampler.server_peak))
                    print(
                        f"  {done:,} rows: peak RSS {sampler.peak} MB (the server alone {sampler.server_peak})",
                        flush=True,
                    )
        seconds = time.perf_counter() - started
        used = cpu_delta(cpu, cpu_seconds(base))
        out["long"] = {"rows": long_n, "seconds": round(seconds, 3), "peak_rss_mb": peaks, **used}
        table.append(
            {
                "phase": f"(3) long insert, PUTs of {args.batch:,}",
                "rows": f"{long_n:,}",
                "wall_s": round(seconds, 1),
                "rows_per_s": rate(long_n, seconds),
                "cpu_s": f"{used['server_python_cpu_s']} + pg {used['postgres_cpu_s']}",
                "server counts": "peak RSS, server + PostgreSQL (the server alone): "
                + ", ".join(f"{mb} ({server} MB) at {n:,}" for n, mb, server in peaks),
            }
        )
        if args.select_rows:
            out["select"] = insert_select(client, base, stub.embedding_model(), args.select_rows)
            table.append(
                {
                    "phase": "(4) INSERT ... SELECT FROM files, one statement",
                    "rows": f"{args.select_rows:,}",
                    "wall_s": out["select"]["seconds"],
                    "rows_per_s": rate(args.select_rows, out["select"]["seconds"]),
                    "cpu_s": f"{out['select']['server_python_cpu_s']} + pg {out['select']['postgres_cpu_s']}",
                    "server counts": f"peak RSS: server {out['select']['server_rss_mb']} "
                    f"(before {out['select']['server_rss_before_mb']}) MB, "
                    f"server + PostgreSQL {out['select']['peak_rss_mb']} MB",
                }
            )
        if args.source_rows:
            out["source"] = insert_from_source(client, base, stub, args.source_rows)
            src = out["source"]
            table.append(
                {
                    "phase": "(5) INSERT ... SELECT FROM a PostgreSQL data source, one statement",
                    "rows": f"{args.source_rows:,}",
                    "wall_s": src["seconds"],
                    "rows_per_s": rate(args.source_rows, src["seconds"]),
                    "cpu_s": f"{src['server_python_cpu_s']} + pg {src['postgres_cpu_s']}",
                    "server counts": f"server RSS before {src['server_rss_before_mb']} MB; peak "
                    + ", ".join(
                        f"{p['server_rss_mb']} MB by {p['share']:.0%} of the time ({p['rows']:,} rows)"
                        for p in src["peaks"]
                    ),
                }
            )
    print_table("writes: stub embedder", table)
    print(f"\nmachine: {os.cpu_count()} CPUs (load average before the run: {load_before})")
    write_result(
        "writes",
        {
            "quick": args.quick,
            "load_average_before": load_before,
            "batch": args.batch,
            "results": out,
            "table": table,
        },
    )


def insert_select(client: httpx.Client, base: Server, model: dict[str, Any], n: int) -> dict[str, Any]:
    """(4): upload a CSV of `n` generated rows, then one `INSERT INTO kb SELECT * FROM files.<it>`."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["id", "body", "topic"])
    for start in range(0, n, 1000):
        for i, body in enumerate(TextGenerator(seed=SEED + 7 + start // 1000).texts(min(1000, n - start))):
            writer.writerow([start + i, body, f"topic{(start + i) % 16}"])
    data = buffer.getvalue().encode()
    del buffer
    client.put(f"{base}/api/files/writes_big", files={"file": ("writes_big.csv", data)}).raise_for_status()
    del data
    create_kb(client, base.kbs, "selected", model)
    before = server_rss_mb(base)
    cpu = cpu_seconds(base)
    started = time.perf_counter()
    with Sampler(base) as sampler:
        sql(client, base, "INSERT INTO selected SELECT * FROM files.writes_big")
    seconds = time.perf_counter() - started
    print(
        f"(4) INSERT ... SELECT of {n:,} rows: {seconds:.1f}s, server RSS peak {sampler.server_peak} MB",
        flush=True,
    )
    return {
        "rows": n,
        "seconds": round(seconds, 1),
        "server_rss_before_mb": before,
        "server_rss_mb": sampler.server_peak,
        "peak_rss_mb": sampler.peak,
        **cpu_delta(cpu, cpu_seconds(base)),
    }


def insert_from_source(client: httpx.Client, base: Server, stub: OpenAIStub, n: int) -> dict[str, Any]:
    """(5): `n` generated rows in a table of a PostgreSQL database attached as a data source, then one
    `INSERT INTO kb SELECT ... FROM` it, the server's RSS sampled throughout."""
    import psycopg

    socket_dir = str(base.data_dir / "pg")
    admin = f"postgresql://postgres@/postgres?host={socket_dir}"
    with psycopg.connect(admin, autocommit=True) as conn:
        port = int(conn.execute("SHOW port").fetchone()[0])  # type: ignore[index]
        conn.execute("DROP DATABASE IF EXISTS sources")
        conn.execute("CREATE DATABASE sources")
    started = time.perf_counter()
    with psycopg.connect(f"postgresql://postgres@/sources?host={socket_dir}", autocommit=True) as conn:
        conn.execute("CREATE TABLE big (id bigint PRIMARY KEY, body text, topic text)")
        with conn.cursor().copy("COPY big (id, body, topic) FROM STDIN") as copy:
            for start in range(0, n, 1000):
                texts = TextGenerator(seed=SEED + 11 + start // 1000).texts(min(1000, n - start))
                for i, body in enumerate(texts):
                    copy.write_row((start + i, body, f"topic{(start + i) % 16}"))
        conn.execute("ANALYZE big")
    print(f"(5) {n:,} source rows written in {time.perf_counter() - started:.0f}s", flush=True)
    params = {"host": socket_dir, "port": port, "user": "postgres", "database": "sources"}
    sql(client, base, "DROP DATABASE IF EXISTS writes_src")
    sql(
        client,
        base,
        f"CREATE DATABASE writes_src WITH ENGINE = 'postgres', PARAMETERS = {json.dumps(params)}",
    )
    create_kb(client, base.kbs, "sourced", stub.embedding_model())
    before = server_rss_mb(base)
    cpu = cpu_seconds(base)
    samples: list[tuple[float, float, int]] = []  # (seconds, server RSS MB, texts embedded so far)
    stop = threading.Event()
    embedded = stub.texts

    def sample() -> None:
        while not stop.wait(0.2):
            samples.append((time.perf_counter() - started, server_rss_mb(base), stub.texts - embedded))

    started = time.perf_counter()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        sql(client, base, "INSERT INTO sourced SELECT id, body, topic FROM writes_src.big")
    finally:
        stop.set()
        sampler.join()
    seconds = time.perf_counter() - started
    peaks = []
    for share in (0.1, 0.5, 1.0):
        window = [s for s in samples if s[0] <= share * seconds] or samples[:1]
        peaks.append(
            {"share": share, "server_rss_mb": max(s[1] for s in window), "rows": max(s[2] for s in window)}
        )
    print(
        f"(5) INSERT ... SELECT of {n:,} rows from a data source: {seconds:.1f}s, peaks {peaks}", flush=True
    )
    return {
        "rows": n,
        "seconds": round(seconds, 1),
        "server_rss_before_mb": before,
        "peaks": peaks,
        "rss_samples": [(round(t, 1), mb, rows) for t, mb, rows in samples[:: max(len(samples) // 200, 1)]],
        **cpu_delta(cpu, cpu_seconds(base)),
    }
