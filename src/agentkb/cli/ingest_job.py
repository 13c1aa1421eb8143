"""The HTTP side of `agentkb ingest`: file names made upload names, uploads (streamed, counted for the progress
bar), the one asynchronous insert, and its job followed through the event stream (reconnecting) to its end.
Imports of httpx and rich happen inside the functions, so `agentkb --help` stays fast."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import httpx
    from rich.console import Console

MAX_NAME = 64
TERMINAL = ("succeeded", "failed", "cancelled")
RECONNECTS = 5


class IngestError(Exception):
    """A refusal or failure to report and exit 1 on."""


def upload_name(path: Path) -> str:
    """The name a file is uploaded as: its name without extension(s), lower-cased, characters other than
    letters, digits and `_` replaced by `_`, starting with a letter or `_`, at most 64 characters."""
    stem = path.name.split(".")[0] or path.name.strip(".").split(".")[0]
    name = re.sub(r"[^a-z0-9_]+", "_", stem.lower()).strip("_") or "file"
    if name[0].isdigit():
        name = f"f_{name}"
    return name[:MAX_NAME].rstrip("_") or "file"


def unique_names(paths: list[Path]) -> list[tuple[Path, str]]:
    """(path, upload name) for each path, a `_2`, `_3`, ... suffix making repeated names distinct."""
    taken: set[str] = set()
    out = []
    for path in paths:
        base = name = upload_name(path)
        n = 1
        while name in taken:
            n += 1
            suffix = f"_{n}"
            name = base[: MAX_NAME - len(suffix)] + suffix
        taken.add(name)
        out.append((path, name))
    return out


def problem(response: httpx.Response) -> str:
    """A refused request as one line: the problem's title and detail, else the status and body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and ("detail" in body or "title" in body):
        title, detail = body.get("title"), body.get("detail")
        return f"{title}: {detail}" if title and detail and title != detail else str(detail or title)
    return f"HTTP {response.status_code}: {response.text[:300]}"


def items_done(counts: dict[str, Any]) -> int:
    """Items finished so far: documents written or checked, unchanged pages and failed items."""
    done = sum(int(counts.get(k, 0) or 0) for k in ("documents", "items_skipped_unchanged", "items_failed"))
    total = counts.get("items_total")
    return min(done, int(total)) if total else done


class Counting:
    """A binary file whose reads advance a callback (an upload's progress); httpx streams it."""

    def __init__(self, path: Path, advance: Any) -> None:
        self.file = path.open("rb")
        self.advance = advance

    def read(self, size: int = -1) -> bytes:
        data = self.file.read(size)
        self.advance(len(data))
        return data

    def fileno(self) -> int:
        return self.file.fileno()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.file.seek(offset, whence)

    def tell(self) -> int:
        return self.file.tell()

    def close(self) -> None:
        self.file.close()


class Ingest:
    def __init__(self, client: httpx.Client, console: Console, project: str, kb: str) -> None:
        self.client = client
        self.console = console
        self.project = project
        self.kb = kb
        self.kb_path = f"/api/projects/{project}/knowledge_bases/{kb}"

    # --- before the job ----------------------------------------------------------------------------

    def check_kb(self) -> None:
        import httpx

        try:
            response = self.client.get(self.kb_path)
        except httpx.TransportError as exc:
            raise IngestError(
                f"cannot reach agentkb at {self.client.base_url}: {exc}. Is `agentkb serve` "
                "running there (see --server)?"
            ) from exc
        if response.status_code == 404:
            raise IngestError(
                f"{problem(response)}. Create it first, e.g.: curl -X POST {self.client.base_url}/api/projects/"
                f"{self.project}/knowledge_bases -H 'content-type: application/json' "
                f'-d \'{{"knowledge_base": {{"name": "{self.kb}"}}}}\''
            )
        if response.status_code != 200:
            raise IngestError(problem(response))

    def upload(self, path: Path, name: str) -> None:
        from rich.markup import escape
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

        if self.client.get(f"/api/files/{name}").status_code == 200:
            response = self.client.delete(f"/api/files/{name}")
            if response.status_code != 200:
                raise IngestError(f"cannot replace the uploaded file {name}: {problem(response)}")
            self.console.print(f"replacing the earlier upload [bold]{name}[/]")
        size = path.stat().st_size
        with Progress(
            TextColumn("upload [bold]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            console=self.console,
            transient=True,
            disable=not self.console.is_terminal,
        ) as bar:
            task = bar.add_task(name, total=size)
            body = Counting(path, lambda n: bar.advance(task, n))
            try:
                response = self.client.put(
                    f"/api/files/{name}",
                    data={"original_file_name": path.name, "source_type": "file", "name": name},
                    files={"file": (path.name, cast(IO[bytes], body), "application/octet-stream")},
                )
            finally:
                body.close()
        if response.status_code == 413:
            raise IngestError(
                f"{path} ({size:,} bytes) is larger than the server accepts: {problem(response)}"
            )
        if response.status_code != 200:
            raise IngestError(f"upload of {path} refused: {problem(response)}")
        record = self.client.get(f"/api/files/{name}").json()
        shape = (
            f"{record['row_count']:,} rows"
            if record.get("row_count") is not None
            else f"{record.get('page_count') or 0:,} pages/sections"
        )
        self.console.print(
            f"uploaded [bold]{escape(path.name)}[/] as [bold]{name}[/] ({size:,} bytes, {shape})"
        )

    def submit(self, body: dict[str, Any]) -> str:
        response = self.client.put(self.kb_path, params={"async": "true"}, json={"knowledge_base": body})
        if response.status_code != 202:
            why = problem(response)
            if "Refusing to fetch" in why and "metadata" not in why:
                why += (
                    " (the server crawls private and loopback addresses only when it runs with "
                    "AGENTKB_CRAWL_ALLOW_PRIVATE=true)"
                )
            raise IngestError(f"insert refused: {why}")
        job_id: str = response.json()["job_id"]
        self.console.print(f"job [bold]{job_id}[/] queued")
        return job_id

    # --- following the job -------------------------------------------------------------------------

    def events(self, job_id: str) -> Iterator[dict[str, Any]]:
        """The job record at each change until it ends; reconnects when the stream drops (a restart)."""
        import httpx
        import orjson

        failures = 0
        while True:
            last: dict[str, Any] | None = None
            try:
                with self.client.stream(
                    "GET", f"{self.kb_path}/jobs/{job_id}/events", timeout=httpx.Timeout(30, read=None)
                ) as response:
                    if response.status_code != 200:
                        response.read()
                        raise IngestError(f"cannot follow job {job_id}: {problem(response)}")
                    for line in response.iter_lines():
                        if line.startswith("data:"):
                            last = orjson.loads(line[5:].strip())
                            failures = 0
                            yield last
                            if last["state"] in TERMINAL:
                                return
            except httpx.TransportError as exc:
                failures += 1
                if failures > RECONNECTS:
                    raise IngestError(
                        f"lost the connection to the server while following job {job_id}: {exc}"
                    ) from exc
                time.sleep(min(2.0**failures / 4, 5.0))
            if last is not None and last["state"] in TERMINAL:
                return

    def get_job(self, job_id: str) -> dict[str, Any]:
        response = self.client.get(f"{self.kb_path}/jobs/{job_id}")
        if response.status_code != 200:
            raise IngestError(f"cannot read job {job_id}: {problem(response)}")
        job: dict[str, Any] = response.json()
        return job

    def cancel(self, job_id: str) -> dict[str, Any]:
        response = self.client.delete(f"{self.kb_path}/jobs/{job_id}")
        if response.status_code not in (200, 202):
            raise IngestError(f"cancel refused: {problem(response)}")
        job: dict[str, Any] = response.json()
        return job

    def follow(self, job_id: str) -> dict[str, Any]:
        """Follow the job to its end: a progress bar on a terminal, a line per change otherwise."""
        if self.console.is_terminal:
            return self._follow_bar(job_id)
        job: dict[str, Any] = {}
        shown = ("", -1.0)
        for job in self.events(job_id):
            line = progress_line(job)
            now = time.monotonic()
            if job["state"] != shown[0] or now - shown[1] >= 2.0 or job["state"] in TERMINAL:
                self.console.print(line, highlight=False, markup=False)
                shown = (job["state"], now)
        return job

    def _follow_bar(self, job_id: str) -> dict[str, Any]:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        job: dict[str, Any] = {}
        with Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.fields[state]:<9}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=self.console,
        ) as bar:
            task = bar.add_task("job", total=None, state="queued", detail="")
            for job in self.events(job_id):
                counts = job.get("counts") or {}
                total = counts.get("items_total")
                bar.update(
                    task,
                    total=int(total) if total else None,
                    completed=items_done(counts),
                    state=job["state"],
                    detail=detail(counts),
                )
        return job


def detail(counts: dict[str, Any]) -> str:
    def n(key: str) -> int:
        return int(counts.get(key, 0) or 0)

    return (
        f"embedded {n('embedded')} · unchanged {n('unchanged') + n('items_skipped_unchanged')} · "
        f"failed {n('items_failed')}"
    )


def progress_line(job: dict[str, Any]) -> str:
    counts = job.get("counts") or {}
    total = counts.get("items_total")
    return f"{job['state']}: {items_done(counts)}/{total if total else '?'} items · {detail(counts)}"
