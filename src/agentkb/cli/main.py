"""The `agentkb` command."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Any

import typer

from agentkb import __version__
from agentkb.cli.ingest import ingest
from agentkb.cli.secret_key import rotate_secret

app = typer.Typer(help="agentkb: AI agents over knowledge bases and SQL data.", no_args_is_help=True)


def _data_dir(data_dir: Path | None) -> dict[str, Any]:
    return {"data_dir": data_dir} if data_dir else {}


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to bind (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 47334).")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (default ~/.agentkb).")] = None,
) -> None:
    """Start the HTTP service."""
    import uvicorn

    from agentkb.app import create_app
    from agentkb.logs import configure
    from agentkb.settings import Settings

    overrides: dict[str, Any] = {
        k: v for k, v in {"host": host, "port": port, "data_dir": data_dir}.items() if v is not None
    }
    settings = Settings(**overrides)
    configure(settings.log_level, settings.log_format)
    uvicorn.run(
        create_app(settings), host=settings.host, port=settings.port, log_config=None, access_log=False
    )


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
) -> None:
    """Run an ingestion worker: take queued async inserts from the database and run them. Start any
    number, on any machine that reaches the same AGENTKB_DATABASE_URL (or the same data directory)."""
    import asyncio

    from agentkb.logs import configure
    from agentkb.runtime import run_worker
    from agentkb.settings import Settings

    settings = Settings(**_data_dir(data_dir))
    configure(settings.log_level, settings.log_format)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_worker(settings))


app.command("ingest")(ingest)

keys = typer.Typer(help="Keys: the secret key that encrypts stored secrets.", no_args_is_help=True)
keys.command("rotate-secret")(rotate_secret)
app.add_typer(keys, name="keys")


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def main() -> None:
    app()
