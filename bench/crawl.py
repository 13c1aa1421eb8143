"""Web-crawl ingestion throughput.

A `GeneratedSite` (tests/ingest/site.py: a 10-ary tree of pages, ~3 kB of article text each inside
navigation chrome) is served on 127.0.0.1 by its own process (`python -m tests.ingest.site --pages N`),
and crawled from /p/0.html to the depth that reaches N pages, with `limit` N:

(a) the crawler alone, in this process (`agentkb.ingest.crawl.crawler.crawl`, no embedding, no database):
    pages/s with the options a KB insert uses (8 requests in flight, 2 per host), with 8 per host
    (what the per-host politeness costs on one host), and with text extraction in a process pool
    (`extraction_pool()`, which KB inserts do not use yet); target ≥ 200 pages/s;
(b) end to end through the API: `agentkb serve` (bench/server.py, AGENTKB_CRAWL_ALLOW_PRIVATE=true), an
    async insert of `urls` into a KB embedding with the instant stub (bench/stubs.py), timed from the
    PUT to the job's end: pages/s including extraction, chunking, embedding and writing; then
    (b') the same crawl again: an incremental recrawl of an unchanged site;
(c) the same with the local all-MiniLM-L6-v2 model (CPU), on fewer pages (the model loaded beforehand).

    python -m bench crawl [--pages 1000] [--local-pages 200] [--quick] [--no-local] [--repeat 3] [--pool-workers N]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import Executor
from pathlib import Path
from typing import Any, Self

import httpx
import psutil

from bench.common import check, print_table, rate, write_result
from bench.server import agentkb_server, cpu_delta, cpu_seconds
from bench.stubs import bench_stub

ROOT = Path(__file__).resolve().parents[1]
TERMINAL = ("succeeded", "failed", "cancelled")


class SiteProcess:
    """`python -m tests.ingest.site --pages N` in its own process; `url` is its base URL."""

    def __init__(self, pages: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.ingest.site", "--pages", str(pages)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.proc.kill()
            raise RuntimeError(f"the generated site did not start (said {self.url!r})")

    def cpu_s(self) -> float:
        times = psutil.Process(self.proc.pid).cpu_times()
        return float(times.user + times.system)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def depth_for(pages: int) -> int:
    """The crawl depth at which the tree (10 children a page) holds `pages` pages."""
    depth, reach = 0, 1
    while reach < pages:
        depth += 1
        reach = reach * 10 + 1
    return depth


def own_cpu() -> float:
    times = psutil.Process().cpu_times()
    return float(times.user + times.system)


def crawl_alone(url: str, pages: int, executor: Executor | None = None, **options: Any) -> dict[str, Any]:
    from agentkb.ingest.crawl.crawler import CrawlOptions, Page, crawl

    crawl_options = CrawlOptions(
        urls=[url], crawl_depth=depth_for(pages), limit=pages, allow_private=True, **options
    )

    async def run() -> tuple[int, int, Counter[str]]:
        got = chars = 0
        skipped: Counter[str] = Counter()
        async for item in crawl(crawl_options, executor=executor):
            if isinstance(item, Page):
                got += 1
                chars += len(item.text)
            else:
                skipped[item.reason] += 1
        return got, chars, skipped

    cpu = own_cpu()
    started = time.perf_counter()
    got, chars, skipped = asyncio.run(run())
    seconds = time.perf_counter() - started
    return {
        "pages": got,
        "seconds": seconds,
        "cpu_s": round(own_cpu() - cpu, 2),
        "text_chars": chars,
        "skipped": dict(skipped),
        "pages_per_s": rate(got, seconds),
    }


def run_job(client: httpx.Client, kbs: str, kb: str, body: dict[str, Any]) -> dict[str, Any]:
    """An async insert, polled to its end; the job record plus `wall_s` (PUT to the end seen)."""
    started = time.perf_counter()
    job_id = check(client.put(f"{kbs}/{kb}", params={"async": "true"}, json={"knowledge_base": body})).json()[
        "job_id"
    ]
    while True:
        job: dict[str, Any] = check(client.get(f"{kbs}/{kb}/jobs/{job_id}")).json()
        if job["state"] in TERMINAL:
            break
        time.sleep(0.05)
    job["wall_s"] = time.perf_counter() - started
    if job["state"] != "succeeded":
        raise RuntimeError(f"job {job_id} {job['state']}: {job['error']} {job['errors'][:5]}")
    return job


def create_kb(client: httpx.Client, kbs: str, name: str, embedding_model: dict[str, Any] | None) -> None:
    body: dict[str, Any] = {"name": name}
    if embedding_model is not None:
        body["embedding_model"] = embedding_model
    check(client.post(kbs, json={"knowledge_base": body}))


def phase(label: str, pages: int, seconds: float, extra: str = "", cpu: str = "") -> dict[str, Any]:
    return {
        "phase": label,
        "pages": f"{pages:,}",
        "wall_s": round(seconds, 2),
        "pages_per_s": rate(pages, seconds),
        "cpu_s": cpu,
        "notes": extra,
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench crawl", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, help="pages for (a) and (b); default 1,000 (--quick: 200)")
    parser.add_argument("--local-pages", type=int, help="pages for (c); default 200 (--quick: 50)")
    parser.add_argument("--repeat", type=int, help="runs of (a), the median kept; default 3 (--quick: 1)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-local", action="store_true", help="skip (c)")
    parser.add_argument(
        "--pool-workers",
        type=int,
        help="processes of the extraction_pool variant of (a); default: the CPU count",
    )
    args = parser.parse_args(argv)
    from agentkb.ingest.crawl.crawler import extraction_pool

    pages = args.pages or (200 if args.quick else 1000)
    local_pages = args.local_pages or (50 if args.quick else 200)
    repeat = args.repeat or (1 if args.quick else 3)
    depth = depth_for(pages)
    pool_workers = args.pool_workers or psutil.cpu_count() or 2
    print(
        f"crawl: a {pages:,}-page generated site, crawl_depth {depth}; {local_pages:,} pages with the local model"
    )

    with SiteProcess(max(pages, local_pages)) as site:
        start = f"{site.url}/p/0.html"
        alone: dict[str, Any] = {}
        pool = extraction_pool(pool_workers)
        crawl_alone(start, 50, executor=pool)  # starts the pool's workers: not timed
        variants: tuple[tuple[str, Executor | None, dict[str, Any]], ...] = (
            ("default", None, {}),
            ("per_host_8", None, {"per_host": 8, "concurrency": 16}),
            ("pool", pool, {}),
        )
        for label, executor, options in variants:
            runs = []
            for _ in range(repeat):
                site_cpu = site.cpu_s()
                result = crawl_alone(start, pages, executor, **options)
                result["site_cpu_s"] = round(site.cpu_s() - site_cpu, 2)
                runs.append(result)
            best = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
            alone[label] = {**best, "options": options, "runs_s": [round(r["seconds"], 3) for r in runs]}
            print(
                f"(a) crawler alone ({label}): {best['pages']} pages in {best['seconds']:.2f}s "
                f"(median of {repeat})"
            )
        pool.shutdown()

        env = {"AGENTKB_CRAWL_ALLOW_PRIVATE": "true"}
        with bench_stub() as stub, agentkb_server(env=env) as base, httpx.Client(timeout=900) as client:
            kbs = base.kbs
            create_kb(client, kbs, "warm_stub", stub.embedding_model())
            create_kb(client, kbs, "crawl_stub", stub.embedding_model())
            run_job(client, kbs, "warm_stub", {"rows": [{"id": 1, "content": "warm up"}]})
            body = {"urls": [start], "crawl_depth": depth, "limit": pages}
            cpu = cpu_seconds(base)
            site_cpu = site.cpu_s()
            stub_job = run_job(client, kbs, "crawl_stub", body)
            stub_cpu = cpu_delta(cpu, cpu_seconds(base))
            stub_site_cpu = round(site.cpu_s() - site_cpu, 2)
            print(
                f"(b) end to end, stub embedder: {stub_job['counts'].get('documents')} pages in "
                f"{stub_job['wall_s']:.2f}s"
            )
            cpu = cpu_seconds(base)
            again_job = run_job(client, kbs, "crawl_stub", body)
            again_cpu = cpu_delta(cpu, cpu_seconds(base))
            print(
                f"(b') recrawl: {again_job['counts'].get('items_total')} pages in {again_job['wall_s']:.2f}s"
            )
            stored = check(client.get(f"{kbs}/crawl_stub")).json()

            local_job = None
            local_cpu: dict[str, float] = {}
            warm_s = 0.0
            if not args.no_local:
                create_kb(client, kbs, "warm_local", None)
                create_kb(client, kbs, "crawl_local", None)
                started = time.perf_counter()
                run_job(client, kbs, "warm_local", {"rows": [{"id": 1, "content": "warm up the model"}]})
                warm_s = time.perf_counter() - started
                cpu = cpu_seconds(base)
                local_job = run_job(
                    client,
                    kbs,
                    "crawl_local",
                    {"urls": [start], "crawl_depth": depth_for(local_pages), "limit": local_pages},
                )
                local_cpu = cpu_delta(cpu, cpu_seconds(base))
                print(
                    f"(c) end to end, local model: {local_job['counts'].get('documents')} pages in "
                    f"{local_job['wall_s']:.2f}s"
                )

    def cpu_text(used: dict[str, float]) -> str:
        return f"{used['server_python_cpu_s']:.1f} + pg {used['postgres_cpu_s']:.1f}"

    counts = stub_job["counts"]
    table = [
        phase(
            "(a) crawler alone, KB insert options (8 in flight, 2 per host)",
            alone["default"]["pages"],
            alone["default"]["seconds"],
            "target ≥ 200 pages/s",
            f"{alone['default']['cpu_s']:.1f} + site {alone['default']['site_cpu_s']:.1f}",
        ),
        phase(
            "(a) crawler alone, 16 in flight, 8 per host",
            alone["per_host_8"]["pages"],
            alone["per_host_8"]["seconds"],
            "",
            f"{alone['per_host_8']['cpu_s']:.1f} + site {alone['per_host_8']['site_cpu_s']:.1f}",
        ),
        phase(
            f"(a) crawler alone, KB insert options, extraction_pool({pool_workers})",
            alone["pool"]["pages"],
            alone["pool"]["seconds"],
            "extraction in worker processes (KB inserts do not use it)",
            f"{alone['pool']['cpu_s']:.1f} (+ pool) + site {alone['pool']['site_cpu_s']:.1f}",
        ),
        phase(
            "(b) API async insert, stub embedder",
            int(counts.get("documents", 0)),
            stub_job["wall_s"],
            f"{counts.get('chunks', 0):,} chunks, {rate(counts.get('chunks', 0), stub_job['wall_s'])} chunks/s; "
            f"job duration {stub_job['duration_s']}s",
            f"{cpu_text(stub_cpu)} + site {stub_site_cpu:.1f}",
        ),
        phase(
            "(b') recrawl of the unchanged site",
            int(again_job["counts"].get("items_total", 0)),
            again_job["wall_s"],
            f"unchanged {again_job['counts'].get('items_skipped_unchanged', 0):,}, "
            f"embedded {again_job['counts'].get('embedded', 0)}",
            cpu_text(again_cpu),
        ),
    ]
    if local_job is not None:
        lc = local_job["counts"]
        table.append(
            phase(
                "(c) API async insert, local all-MiniLM-L6-v2 (CPU)",
                int(lc.get("documents", 0)),
                local_job["wall_s"],
                f"{lc.get('chunks', 0):,} chunks, {rate(lc.get('chunks', 0), local_job['wall_s'])} chunks/s",
                cpu_text(local_cpu),
            )
        )
    print_table(f"crawl: generated site on 127.0.0.1 (own process), start /p/0.html, depth {depth}", table)
    print(
        "\ncpu_s: (a) this process + the site's process; (b)-(c) the server's Python + its PostgreSQL "
        f"(+ the site's for (b)). Machine: {psutil.cpu_count()} CPUs, shared."
    )
    print(
        f"(a) runs (s): default {alone['default']['runs_s']}, per_host_8 {alone['per_host_8']['runs_s']}, "
        f"pool {alone['pool']['runs_s']}; "
        f"mean page text {alone['default']['text_chars'] / max(1, alone['default']['pages']):.0f} characters"
    )
    write_result(
        "crawl",
        {
            "quick": args.quick,
            "pages": pages,
            "crawl_depth": depth,
            "local_pages": None if args.no_local else local_pages,
            "crawler_alone": alone,
            "api_stub": {
                "wall_s": stub_job["wall_s"],
                "job_duration_s": stub_job["duration_s"],
                "counts": counts,
                "pages_per_s": rate(int(counts.get("documents", 0)), stub_job["wall_s"]),
                "cpu": stub_cpu,
                "site_cpu_s": stub_site_cpu,
            },
            "api_recrawl": {
                "wall_s": again_job["wall_s"],
                "counts": again_job["counts"],
                "cpu": again_cpu,
                "pages_per_s": rate(int(again_job["counts"].get("items_total", 0)), again_job["wall_s"]),
            },
            "api_local": None
            if local_job is None
            else {
                "wall_s": local_job["wall_s"],
                "job_duration_s": local_job["duration_s"],
                "counts": local_job["counts"],
                "pages_per_s": rate(int(local_job["counts"].get("documents", 0)), local_job["wall_s"]),
                "cpu": local_cpu,
                "model_warm_s": round(warm_s, 2),
            },
            "kb_after": {k: stored.get(k) for k in ("document_count", "chunk_count")},
            "median_of": repeat,
            "table": table,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
