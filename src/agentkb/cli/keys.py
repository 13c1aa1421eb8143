"""`agentkb keys create | list | revoke`: API keys, on the same database as `agentkb serve` (the embedded
one in the data directory, or AGENTKB_DATABASE_URL). A running server sees a change on its next request.

More commands that work on the database join this sub-app: decorate them with `@keys.command()` and open
the services with `with_services`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

if TYPE_CHECKING:
    from agentkb.service.container import Services
    from agentkb.settings import Settings
    from agentkb.storage.embedded import EmbeddedPostgres

T = TypeVar("T")

keys = typer.Typer(
    help="API keys: create (the key is shown once), list, revoke. Any key turns authentication on.",
    no_args_is_help=True,
)

DataDirOption = Annotated[Path | None, typer.Option(help="Data directory (default ~/.agentkb).")]


def settings_for(data_dir: Path | None) -> Settings:
    from agentkb.settings import Settings

    overrides: dict[str, Any] = {"data_dir": data_dir} if data_dir else {}
    return Settings(**overrides)


def with_services(
    settings: Settings | Path | None,
    work: Callable[[Services], Awaitable[T]],
    *,
    embedded: EmbeddedPostgres | None = None,
) -> T:
    """Run `work` with the services of the database `agentkb serve` uses (migrated first), then close it.
    `settings` may be a data directory (or None: the configured one); `embedded`, an embedded PostgreSQL
    whose start was begun, to use (and stop) rather than starting one."""
    from agentkb.errors import AgentKBError
    from agentkb.runtime import open_runtime
    from agentkb.settings import Settings

    resolved = settings if isinstance(settings, Settings) else settings_for(settings)

    async def run() -> T:
        async with open_runtime(resolved, run_worker=False, embedded=embedded) as services:
            return await work(services)

    try:
        return asyncio.run(run())
    except AgentKBError as exc:
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(1) from exc


def _when(moment: datetime | None) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z") if moment else "never"


def _projects(given: list[str] | None) -> list[str] | None:
    """`--project a --project b,c` → ["a", "b", "c"]; None when no `--project` was given."""
    if not given:
        return None
    return [name.strip() for value in given for name in value.split(",") if name.strip()]


def _scope(read_only: bool, projects: tuple[str, ...] | None) -> str:
    where = f"projects {','.join(projects)}" if projects is not None else "all projects"
    return f"{'read-only' if read_only else 'read-write'}, {where}"


@keys.command()
def create(
    name: Annotated[str, typer.Argument(help="A name for the key (who or what uses it).")],
    read_only: Annotated[
        bool, typer.Option("--read-only", help="The key may read, search and ask agents, but not write.")
    ] = False,
    project: Annotated[
        list[str] | None,
        typer.Option(
            "--project",
            help="Limit the key to this project (repeat the option or give a comma-separated list). A "
            "project key cannot reach data sources, uploaded files or other projects.",
        ),
    ] = None,
    data_dir: DataDirOption = None,
) -> None:
    """Create an API key and print it. It is shown only this once (the last line of the output)."""
    projects = _projects(project)
    if project and not projects:
        typer.echo("error: --project needs a project name", err=True)
        raise typer.Exit(1)
    key = with_services(
        data_dir, lambda services: services.auth.create_key(name, read_only=read_only, projects=projects)
    )
    typer.echo(f"API key {name} created. Store it now: it cannot be shown again.", err=True)
    typer.echo("Send it as `Authorization: Bearer <key>` or `X-Api-Key: <key>`.", err=True)
    typer.echo(key)


@keys.command("list")
def list_keys(data_dir: DataDirOption = None) -> None:
    """List the API keys: name, when created, when last used, scope (the keys themselves are not stored)."""
    rows = with_services(data_dir, lambda services: services.auth.list_keys())
    if not rows:
        typer.echo("no API keys")
        return
    width = max(4, *(len(row.name) for row in rows))
    typer.echo(f"{'NAME':<{width}}  {'CREATED':<23}  {'LAST USED':<23}  SCOPE")
    for row in rows:
        scope = _scope(row.read_only, row.projects)
        typer.echo(
            f"{row.name:<{width}}  {_when(row.created_at):<23}  {_when(row.last_used_at):<23}  {scope}"
        )


@keys.command()
def revoke(
    name: Annotated[str, typer.Argument(help="The key to revoke.")],
    data_dir: DataDirOption = None,
) -> None:
    """Revoke an API key: requests with it are refused from now on, by every server on this database."""

    async def work(services: Services) -> bool:
        await services.auth.revoke_key(name)
        return await services.auth.any_key()

    keys_left = with_services(data_dir, work)
    typer.echo(f"API key {name} revoked")
    if not keys_left:
        typer.echo(
            "that was the last API key: a server on 127.0.0.1 without AGENTKB_USERNAME/AGENTKB_PASSWORD now "
            "runs with authentication off (one bound to another interface keeps refusing requests without "
            "a credential)",
            err=True,
        )
