"""The `agentkb` command."""

from __future__ import annotations

import contextlib
import gc
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentkb import __version__
from agentkb.cli.evaluate import evaluate
from agentkb.cli.ingest import ingest
from agentkb.cli.jobs import jobs
from agentkb.cli.keys import keys, with_services
from agentkb.cli.mcp import mcp
from agentkb.cli.secret_key import rotate_secret
from agentkb.cli.transfer import export, import_

if TYPE_CHECKING:
    from agentkb.storage.embedded import EmbeddedPostgres

app = typer.Typer(help="agentkb: AI agents over knowledge bases and SQL data.", no_args_is_help=True)


def _data_dir(data_dir: Path | None) -> dict[str, Any]:
    return {"data_dir": data_dir} if data_dir else {}


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to bind (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 47334).")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (default ~/.agentkb).")] = None,
    allow_no_auth: Annotated[
        bool,
        typer.Option(
            "--allow-no-auth",
            help="Serve on a non-loopback --host with no authentication configured (refused otherwise).",
        ),
    ] = False,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            help="Server processes answering on the port, sharing the database (each with its own "
            "ingestion worker). With no AGENTKB_DATABASE_URL this process runs the embedded PostgreSQL for "
            "them.",
        ),
    ] = 1,
) -> None:
    """Start the HTTP service. On a non-loopback --host it needs authentication (AGENTKB_USERNAME and
    AGENTKB_PASSWORD, or an API key from `agentkb keys create`) unless --allow-no-auth is given.
    SIGTERM/SIGINT stops it within AGENTKB_SHUTDOWN_GRACE_S; a second one at once."""
    # no garbage collection while the server's modules import and its services start: it walks what will
    # live as long as the process; started again once the server listens (cli.server.settle_garbage_collector)
    gc.disable()
    # pydantic looks for plugins in every installed package's entry points as it builds the first model
    # (~20-40 ms of a start, the more packages the longer); the server uses none. An operator's own
    # PYDANTIC_DISABLE_PLUGINS wins (set empty, every plugin loads). The --workers processes inherit it.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from agentkb.logs import configure
    from agentkb.settings import Settings
    from agentkb.storage.embedded import EmbeddedPostgres

    overrides: dict[str, Any] = {
        k: v for k, v in {"host": host, "port": port, "data_dir": data_dir}.items() if v is not None
    }
    if allow_no_auth:
        overrides["allow_no_auth"] = True
    settings = Settings(**overrides)
    configure(settings.log_level, settings.log_format)
    embedded = None
    if workers == 1 and settings.database_url is None:
        # the embedded PostgreSQL starts in a thread while the app's modules import
        embedded = EmbeddedPostgres(settings.pg_dir)
        embedded.begin()
    if _refuse_exposed_without_auth(settings, embedded):
        embedded = None  # the check's runtime used it and stopped it
    if workers > 1:
        from agentkb.cli.supervisor import serve_workers

        gc.enable()  # the supervising process serves nothing; each server process pauses its own collector

        serve_workers(settings, overrides, workers)
        return
    from agentkb.app import create_app
    from agentkb.cli.server import serve as run_server

    run_server(
        create_app(settings, embedded=embedded),
        host=settings.host,
        port=settings.port,
        grace_s=settings.shutdown_grace_s,
    )


def _refuse_exposed_without_auth(settings: Any, embedded: EmbeddedPostgres | None = None) -> bool:
    """Exit (status 2) instead of serving the API open to the network: a non-loopback host needs a login
    or an API key, unless --allow-no-auth. (A server started otherwise, say by uvicorn itself, still
    refuses every request without a credential on such a host.) True when the check opened the services,
    on `embedded` (whose start was begun) if given, which it then stopped."""
    from agentkb.service.platform import is_loopback

    if settings.allow_no_auth or is_loopback(settings.host) or settings.username is not None:
        return False
    problem = with_services(settings, lambda services: services.auth.exposure_problem(), embedded=embedded)
    if problem is not None:
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)
    return True


@app.command()
def migrate(
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (default ~/.agentkb).")] = None,
) -> None:
    """Apply database migrations and exit."""
    from agentkb.settings import Settings
    from agentkb.storage import migrate as migrations
    from agentkb.storage.embedded import EmbeddedPostgres

    settings = Settings(**_data_dir(data_dir))
    embedded = None
    url = settings.database_url
    if url is None:
        embedded = EmbeddedPostgres(settings.pg_dir)
        url = embedded.start()
    try:
        migrations.upgrade(url)
    finally:
        if embedded is not None:
            embedded.stop()
    typer.echo("schema is up to date")


@app.command()
def worker(
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (default ~/.agentkb).")] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            envvar="AGENTKB_WORKER_METRICS_PORT",
            help="Serve this worker's Prometheus metrics (ingest work, embedding calls, jobs) on this port, "
            "all interfaces, without authentication.",
        ),
    ] = None,
) -> None:
    """Run an ingestion worker: take queued async inserts from the database and run them. Start any
    number, on any machine that reaches the same AGENTKB_DATABASE_URL (or the same data directory).
    SIGTERM/SIGINT hands the running job back to the queue and exits; a second one exits at once."""
    import asyncio

    if metrics_port:
        from agentkb.metrics import serve_http

        serve_http(metrics_port)

    from agentkb.logs import configure
    from agentkb.runtime import run_worker
    from agentkb.settings import Settings

    settings = Settings(**_data_dir(data_dir))
    configure(settings.log_level, settings.log_format)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_worker(settings))


app.command("ingest")(ingest)
app.command("evaluate")(evaluate)
app.command("mcp")(mcp)
app.command("export")(export)
app.command("import")(import_)
keys.command("rotate-secret")(rotate_secret)
app.add_typer(keys, name="keys")
app.add_typer(jobs, name="jobs")


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def main() -> None:
    app()
