"""`agentkb jobs list | history | run`: MindsDB's JOBS (scheduled SQL statements) on a running agentkb server,
over `/api/projects/{p}/jobs`.

    agentkb jobs list                          # the project's jobs: schedule, next run, last run
    agentkb jobs history kb_sync --limit 5     # a job's runs, newest first
    agentkb jobs run kb_sync --wait            # run it now and follow that run to its end

`run --wait` follows the run that serves the request: the request makes the job due at the server's time
T (the answer's `next_run_at`), and the scheduler opens that run with `tick_at` T, after any run of it
already in progress. A run handed back by a stopping server runs its tick again, so it is followed on.
A job without a schedule is removed after its run (as MindsDB does): its run is then read from SQL's
`jobs_history`. Exit status: 0 done (the run succeeded or was skipped by its IF), 1 refused, failed or
not reachable, 130 when left waiting after Ctrl-C (the run goes on). Imports of httpx and rich happen
inside the commands, so `agentkb --help` stays fast.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentkb.cli.ingest import DEFAULT_SERVER
from agentkb.cli.ingest_job import problem

if TYPE_CHECKING:
    import httpx
    from rich.console import Console

POLL_S = 0.5
HISTORY_SHOWN = 20
FOLLOWED = 50  # runs read per poll while waiting (a job every second makes several meanwhile)
FOLLOW_ON = "handed_back"  # a run interrupted by a stopping server: its tick runs again
STYLE = {"succeeded": "green", "failed": "red", "skipped": "yellow", "running": "cyan", FOLLOW_ON: "yellow"}

jobs = typer.Typer(
    help="MindsDB's JOBS (scheduled SQL) on a running agentkb server: list, history, run now.",
    no_args_is_help=True,
)

ProjectOption = Annotated[str, typer.Option(help="Project of the jobs.")]
ServerOption = Annotated[str, typer.Option(help="Base URL of the agentkb server.")]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(envvar="AGENTKB_API_KEY", help="API key for a server with authentication on."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the server's JSON answer.")]


class JobsError(Exception):
    """A refusal or failure to report and exit 1 on."""


@contextmanager
def _client(server: str, api_key: str | None) -> Iterator[httpx.Client]:
    """An HTTP client of the server; refusals and transport errors become `error: …` and exit 1."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.Client(base_url=server.rstrip("/"), timeout=60, headers=headers) as client:
            yield client
    except JobsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    except httpx.TransportError as exc:
        typer.echo(
            f"error: cannot reach agentkb at {server}: {exc} (is `agentkb serve` running there?)", err=True
        )
        raise typer.Exit(1) from exc


def _checked(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise JobsError(problem(response))
    return response.json()


def _path(project: str, name: str | None = None) -> str:
    from urllib.parse import quote

    base = f"/api/projects/{quote(project, safe='')}/jobs"
    return f"{base}/{quote(name, safe='')}" if name is not None else base


def _console() -> Console:
    from rich.console import Console

    return Console(highlight=False)


def _short(value: str | None) -> str:
    """A timestamp to the second (the server's are `YYYY-MM-DD HH:MM:SS.ffffff`, UTC)."""
    return value[:19] if value else "-"


def _state(run: dict[str, Any] | None) -> str:
    from rich.markup import escape

    if run is None:
        return "-"
    state = str(run["state"])
    style = STYLE.get(state, "")
    return f"[{style}]{escape(state)}[/]" if style else escape(state)


def _duration(run: dict[str, Any]) -> str:
    from datetime import datetime

    if not run.get("run_end"):
        return ""
    seconds = (
        datetime.fromisoformat(run["run_end"]) - datetime.fromisoformat(run["run_start"])
    ).total_seconds()
    return f" in {seconds:.1f} s"


@jobs.command("list")
def list_jobs(
    project: ProjectOption = "mindsdb",
    server: ServerOption = DEFAULT_SERVER,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """The project's jobs: schedule, next run, whether one is running, and each one's last run."""
    from rich.markup import escape
    from rich.table import Table

    with _client(server, api_key) as client:
        found: list[dict[str, Any]] = _checked(client.get(_path(project)))
        if as_json:
            typer.echo(json.dumps(found, indent=2))
            return
        last = {job["name"]: _history(client, project, job["name"], 1) for job in found}
    console = _console()
    if not found:
        console.print(f"no jobs in project {escape(project)}")
        return
    table = Table("name", "schedule", "start", "end", "next run", "running", "last run", "error")
    table.title, table.title_justify = f"{len(found)} job(s) in {escape(project)} (times in UTC)", "left"
    for job in found:
        runs = last[job["name"]]
        run = runs[0] if runs else None
        table.add_row(
            escape(job["name"]),
            escape(job["schedule_str"] or "once"),
            _short(job["start_at"]),
            _short(job["end_at"]),
            _short(job["next_run_at"]),
            "[cyan]yes[/]" if job["running"] else "no",
            f"{_state(run)} {_short(run['run_start'])}" if run else "-",
            escape((run or {}).get("error") or ""),
        )
    console.print(table)


def _history(client: httpx.Client, project: str, name: str, limit: int) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = _checked(
        client.get(f"{_path(project, name)}/history", params={"limit": limit})
    )
    return runs


@jobs.command()
def history(
    name: Annotated[str, typer.Argument(help="The job.")],
    project: ProjectOption = "mindsdb",
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Runs shown, newest first.")] = HISTORY_SHOWN,
    server: ServerOption = DEFAULT_SERVER,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """A job's runs, newest first: the tick each served, start, end, state, error, its ingestion jobs."""
    from rich.markup import escape
    from rich.table import Table

    with _client(server, api_key) as client:
        runs = _history(client, project, name, limit)
    if as_json:
        typer.echo(json.dumps(runs, indent=2))
        return
    console = _console()
    if not runs:
        console.print(f"job {escape(name)} has not run yet")
        return
    table = Table("run", "tick", "start", "end", "state", "error", "ingestion jobs")
    table.title, table.title_justify = f"runs of {escape(name)}, newest first (times in UTC)", "left"
    for run in runs:
        table.add_row(
            str(run["id"]),
            _short(run["tick_at"]),
            _short(run["run_start"]),
            _short(run["run_end"]),
            _state(run),
            escape(run["error"] or ""),
            escape(", ".join(run["ingest_jobs"])),
        )
    console.print(table)


# --- run now ------------------------------------------------------------------------------------------------


def _dropped_runs(client: httpx.Client, project: str, name: str) -> list[dict[str, Any]]:
    """The runs of a job that is gone (a job without a schedule is removed after its run), from SQL's
    `jobs_history`, shaped as the REST history's records."""
    quoted = name.lower().replace("'", "''")
    answer = _checked(
        client.post(
            "/api/sql/query",
            json={"query": f"SELECT * FROM jobs_history WHERE name = '{quoted}'", "context": {"db": project}},
        )
    )
    if answer.get("type") != "table":
        raise JobsError(f"cannot read the history of job {name}: {answer.get('error_message') or answer}")
    rows = [dict(zip(answer["column_names"], row, strict=True)) for row in answer["data"]]
    return [
        {
            "id": None,
            "name": row["NAME"],
            "project": row["PROJECT"],
            "tick_at": row["TICK_AT"],
            "run_start": row["RUN_START"],
            "run_end": row["RUN_END"],
            "state": row["STATE"],
            "error": row["ERROR"],
            "ingest_jobs": row["INGEST_JOBS"] or [],
        }
        for row in rows
        if str(row["PROJECT"]).lower() == project.lower()
    ]


def _runs_since(client: httpx.Client, project: str, name: str, since: str) -> list[dict[str, Any]]:
    """The job's runs serving a tick at or after `since` (server time), oldest first."""
    response = client.get(f"{_path(project, name)}/history", params={"limit": FOLLOWED})
    runs = _dropped_runs(client, project, name) if response.status_code == 404 else _checked(response)
    later = [run for run in runs if run["tick_at"] >= since]
    return sorted(later, key=lambda run: (run["tick_at"], run["run_start"]))


def _follow(
    client: httpx.Client,
    project: str,
    name: str,
    since: str,
    note: Callable[[str], None],
    timeout: float | None,
) -> dict[str, Any]:
    """The first run serving a tick at or after `since` that ended (a handed-back one is followed on)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    seen: set[tuple[str, str]] = set()
    while True:
        for run in _runs_since(client, project, name, since):
            key = (run["run_start"], run["state"])
            if key not in seen:
                seen.add(key)
                if run["state"] == "running":
                    note(f"run started {_short(run['run_start'])} UTC")
                elif run["state"] == FOLLOW_ON:
                    note(f"run handed back ({run['error']}); waiting for its tick to run again")
            if run["run_end"] is not None and run["state"] != FOLLOW_ON:
                return run
            if run["run_end"] is None:
                break
        if deadline is not None and time.monotonic() > deadline:
            raise JobsError(f"the run of {name} did not end within {timeout:g} s (it goes on on the server)")
        time.sleep(POLL_S)


@jobs.command()
def run(
    name: Annotated[str, typer.Argument(help="The job.")],
    project: ProjectOption = "mindsdb",
    wait: Annotated[
        bool, typer.Option("--wait", help="Follow the run to its end; exit 1 when it failed.")
    ] = False,
    timeout: Annotated[
        float | None, typer.Option(min=0, help="With --wait: give up after this many seconds (exit 1).")
    ] = None,
    server: ServerOption = DEFAULT_SERVER,
    api_key: ApiKeyOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the job's record (with --wait: the run's) as JSON.")
    ] = False,
) -> None:
    """Run a job now (a scheduler of the server runs it within moments; its schedule goes on after). A job
    already running runs again once that run ends."""
    from rich.markup import escape

    console = _console()
    with _client(server, api_key) as client:
        job = _checked(client.post(f"{_path(project, name)}/run"))
        since = str(job["next_run_at"])
        if not wait:
            if as_json:
                typer.echo(json.dumps(job, indent=2))
            else:
                console.print(f"job [bold]{escape(job['name'])}[/] is due now ({_short(since)} UTC)")
            return
        if not as_json:
            console.print(f"job [bold]{escape(job['name'])}[/] is due now ({_short(since)} UTC)")
        live = console.is_terminal and not as_json
        try:
            with console.status("waiting for the run…", spinner="dots") if live else nullcontext() as status:

                def note(line: str) -> None:
                    if status is not None:
                        status.update(escape(line))
                    elif not as_json:
                        console.print(escape(line))

                done = _follow(client, project, job["name"], since, note, timeout)
        except KeyboardInterrupt:
            console.print("stopped waiting: the run goes on on the server")
            raise typer.Exit(130) from None
    if as_json:
        typer.echo(json.dumps(done, indent=2))
    else:
        _report(console, job["name"], done)
    if done["state"] == "failed":
        raise typer.Exit(1)


def _report(console: Console, name: str, done: dict[str, Any]) -> None:
    from rich.markup import escape

    console.print(
        f"run of [bold]{escape(name)}[/] (tick {_short(done['tick_at'])} UTC): {_state(done)}{_duration(done)}"
    )
    if done.get("error"):
        console.print(f"[red]error:[/] {escape(done['error'])}", soft_wrap=True)
    if done.get("ingest_jobs"):
        console.print(f"ingestion jobs: {escape(', '.join(done['ingest_jobs']))}")
