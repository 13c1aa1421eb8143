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

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentkb.cli.ingest_job import (
    TERMINAL,
    Ingest,
    IngestError,
    unique_names,
)

if TYPE_CHECKING:
    from rich.console import Console

DEFAULT_SERVER = "http://127.0.0.1:47334"
SHOWN_ITEM_ERRORS = 20
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
