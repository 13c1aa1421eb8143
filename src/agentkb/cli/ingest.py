"""`agentkb ingest`: load files and web sites into a knowledge base of a running agentkb server.

    agentkb ingest docs_kb --file handbook.pdf --file prices.csv --url https://example.com/docs/ --crawl-depth 2

It speaks the HTTP API only (so it works against any agentkb, local or remote): each `--file` is
uploaded with `PUT /api/files/{name}` (name: the file name without its extension, lower-cased and made an
identifier; an upload of that name is replaced), then ONE asynchronous insert
(`PUT /api/projects/{p}/knowledge_bases/{kb}?async=true`) names the files and URLs, and its job is followed
through `GET .../jobs/{id}/events` with a progress bar until it ends. Exit status: 0 when the job
succeeded, 1 when it failed or was cancelled (or the request was refused), 130 when left running after
Ctrl-C. Ctrl-C asks whether to cancel the job (`DELETE .../jobs/{id}`).

Imports of httpx and rich happen inside the command, so `agentkb --help` stays fast.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, cast

import typer

if TYPE_CHECKING:
    import httpx
    from rich.console import Console

DEFAULT_SERVER = "http://127.0.0.1:47334"
MAX_NAME = 64
TERMINAL = ("succeeded", "failed", "cancelled")
SHOWN_ITEM_ERRORS = 20
RECONNECTS = 5
COUNT_ROWS = (  # (key of the job's counts, what it counts), in the summary table's order
    ("items_total", "items seen (rows, file sections, crawled pages)"),
    ("documents", "documents written or checked"),
    ("chunks", "chunks they now have"),
    ("embedded", "chunks embedded"),
    ("reused_vectors", "vectors reused (same text already stored)"),
    ("unchanged", "chunks unchanged (nothing to do)"),
    ("written", "chunks written"),
    ("deleted", "stale chunks deleted"),
    ("items_skipped_unchanged", "pages unchanged since the last crawl"),
    ("items_skipped", "URLs skipped (robots, off-domain, filters, type, duplicates)"),
    ("items_failed", "items failed"),
)


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


class _Counting:
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
            body = _Counting(path, lambda n: bar.advance(task, n))
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
            line = _progress_line(job)
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
                    detail=_detail(counts),
                )
        return job


def _detail(counts: dict[str, Any]) -> str:
    def n(key: str) -> int:
        return int(counts.get(key, 0) or 0)

    return (
        f"embedded {n('embedded')} · unchanged {n('unchanged') + n('items_skipped_unchanged')} · "
        f"failed {n('items_failed')}"
    )


def _progress_line(job: dict[str, Any]) -> str:
    counts = job.get("counts") or {}
    total = counts.get("items_total")
    return f"{job['state']}: {items_done(counts)}/{total if total else '?'} items · {_detail(counts)}"


def summary(console: Console, job: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    counts = job.get("counts") or {}
    style = {"succeeded": "green", "failed": "red", "cancelled": "yellow"}.get(job["state"], "")
    duration = f" in {job['duration_s']:.1f} s" if job.get("duration_s") is not None else ""
    table = Table(title=f"job {job['id']}: [{style}]{job['state']}[/]{duration}", title_justify="left")
    table.add_column("count", justify="right")
    table.add_column("what")
    for key, meaning in COUNT_ROWS:
        if key in counts or key in ("documents", "embedded", "items_failed"):
            table.add_row(f"{int(counts.get(key, 0) or 0):,}", f"{meaning} [dim]({key})[/]")
    console.print(table)
    if job.get("error"):
        console.print(f"[red]error:[/] {escape(job['error'])}", highlight=False, soft_wrap=True)
    if job["state"] in ("failed", "cancelled"):
        console.print("nothing of this job was kept: an insert is applied whole or not at all")
    errors = job.get("errors") or []
    if errors:
        console.print(f"[yellow]{len(errors)} item(s) failed:[/]")
        for item in errors[:SHOWN_ITEM_ERRORS]:
            console.print(
                escape(f"  {item.get('item')}: {item.get('error')}"), highlight=False, soft_wrap=True
            )
        if len(errors) > SHOWN_ITEM_ERRORS:
            console.print(f"  ... and {len(errors) - SHOWN_ITEM_ERRORS} more (GET the job for all of them)")


def _ask_cancel(console: Console, job_id: str) -> bool:
    from rich.prompt import Confirm

    try:
        return Confirm.ask(
            f"\nCancel job {job_id}? (no: leave it running and exit)", console=console, default=False
        )
    except (EOFError, KeyboardInterrupt):
        return False


def ingest(
    kb: Annotated[str, typer.Argument(help="The knowledge base to insert into (it must exist).")],
    project: Annotated[str, typer.Option(help="Project of the knowledge base.")] = "mindsdb",
    file: Annotated[
        list[Path] | None,
        typer.Option(
            "--file",
            "-f",
            exists=True,
            dir_okay=False,
            readable=True,
            help="A file to upload and insert (PDF, DOCX, PPTX, HTML, Markdown, TXT, CSV, TSV, XLSX, JSON, "
            "JSONL); repeat for more.",
        ),
    ] = None,
    url: Annotated[
        list[str] | None, typer.Option("--url", "-u", help="A start URL to crawl; repeat for more.")
    ] = None,
    crawl_depth: Annotated[
        int | None,
        typer.Option(
            min=0, help="Link hops followed from the start URLs (server default 1; 0 = the start pages only)."
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Most pages to crawl (server default 1000, at most 10000).")
    ] = None,
    allowed_domain: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-domain",
            help="Follow links only to this domain (and its subdomains); repeat for more. "
            "Default: the start URLs' domains.",
        ),
    ] = None,
    server: Annotated[str, typer.Option(help="Base URL of the agentkb server.")] = DEFAULT_SERVER,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Submit the job, print its id and exit without following it.")
    ] = False,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="AGENTKB_API_KEY",
            help="API key for a server with authentication on (from `agentkb keys create NAME`).",
        ),
    ] = None,
) -> None:
    """Upload files and crawl web sites into a knowledge base, as one job, showing its progress."""
    import httpx
    from rich.console import Console
    from rich.markup import escape

    console = Console(highlight=False)
    files, urls = file or [], url or []
    if not files and not urls:
        raise typer.BadParameter("give at least one --file or --url", param_hint="--file / --url")
    if not urls and (crawl_depth is not None or limit is not None or allowed_domain):
        raise typer.BadParameter("--crawl-depth, --limit and --allowed-domain apply to --url crawls only")
    body: dict[str, Any] = {}
    if urls:
        body["urls"] = urls
        if crawl_depth is not None:
            body["crawl_depth"] = crawl_depth
        if limit is not None:
            body["limit"] = limit
        if allowed_domain:
            body["filters"] = {"allowed_domains": allowed_domain}
    timeout = httpx.Timeout(
        60, read=600
    )  # an upload is parsed before it is answered: large ones take a while
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(base_url=server.rstrip("/"), timeout=timeout, headers=headers) as client:
        run = Ingest(client, console, project, kb)
        job_id = None
        try:
            run.check_kb()
            if files:
                names = unique_names(files)
                for path, name in names:
                    run.upload(path, name)
                body["files"] = [name for _, name in names]
            job_id = run.submit(body)
            if no_wait:
                console.print(f"follow it: GET {server.rstrip('/')}{run.kb_path}/jobs/{job_id}/events")
                return
            while True:
                try:
                    job = run.follow(job_id)
                    break
                except KeyboardInterrupt:
                    if not _ask_cancel(console, job_id):
                        console.print(
                            f"job {job_id} keeps running; follow it with GET "
                            f"{server.rstrip('/')}{run.kb_path}/jobs/{job_id}/events"
                        )
                        raise typer.Exit(130) from None
                    job = run.cancel(job_id)
                    console.print(
                        "cancel requested: a running job stops at its next progress check and "
                        "its whole insert is rolled back"
                    )
                    if job["state"] in TERMINAL:
                        break
        except IngestError as exc:
            console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None
        except httpx.TransportError as exc:
            console.print(
                f"[red]error:[/] cannot reach agentkb at {escape(server)}: {escape(str(exc))}", soft_wrap=True
            )
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            if job_id is not None:
                console.print(f"\ninterrupted; job {job_id} was submitted and keeps running")
            raise typer.Exit(130) from None
        summary(console, job)
        raise typer.Exit(0 if job["state"] == "succeeded" else 1)
