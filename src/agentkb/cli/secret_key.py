"""`agentkb keys rotate-secret`: re-encrypt every stored secret under a new key.

Where the key lives decides what happens:
- the key file (`<data_dir>/secret.key`, or `AGENTKB_SECRET_KEY_FILE`): a new key is written to it first,
  next to the old one (so an interruption loses nothing), every secret is re-encrypted under the new key
  in one transaction, then the old key is dropped from the file;
- `AGENTKB_SECRET_KEY` with one key: a new key is generated and printed *before* anything changes, every
  secret is re-encrypted under it, and the user sets `AGENTKB_SECRET_KEY` to it on every process;
- `AGENTKB_SECRET_KEY` with several keys (`new,old`): every secret is re-encrypted under the first one,
  and the old ones can then be dropped.

Stop the agentkb processes sharing the database first (or restart them afterwards): a running process
keeps the key it started with.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from agentkb.secrecy import SecretBox
    from agentkb.service.platform import SecretReport
    from agentkb.settings import Settings

app = typer.Typer(help="Secret-key management.", no_args_is_help=True)


def rotate_secret(
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (default ~/.agentkb).")] = None,
) -> None:
    """Re-encrypt every stored secret (provider keys, passwords) under a new key."""
    from agentkb import secrecy
    from agentkb.settings import Settings

    settings = Settings(data_dir=data_dir) if data_dir else Settings()
    try:
        source = secrecy.load_keys(settings)
    except secrecy.SecretKeyError as exc:
        raise typer.BadParameter(str(exc)) from None
    if source.path is None and len(source.keys) > 1:
        keys = source.keys
        typer.echo(f"Re-encrypting under the first key of AGENTKB_SECRET_KEY ({secrecy.key_id(keys[0])}).")
    else:
        keys = [secrecy.generate_key(), *source.keys]
        if source.path is None:
            typer.echo(
                "New secret key (set AGENTKB_SECRET_KEY to it for every agentkb process sharing this "
                f"database):\n\n    {keys[0]}\n"
            )
        else:
            secrecy.write_key_file(source.path, keys)  # new and old: an interruption loses nothing
    try:
        report = asyncio.run(_rotate(settings, secrecy.SecretBox(keys, source.label)))
    except secrecy.SecretUnavailable as exc:
        if source.path is not None:
            secrecy.write_key_file(source.path, source.keys)  # as it was
        typer.echo(f"Nothing was changed: {exc.detail}", err=True)
        raise typer.Exit(1) from None
    if source.path is not None:
        secrecy.write_key_file(source.path, keys[:1])
    typer.echo(
        f"Re-encrypted {report.sealed + report.plain} secret(s) in {report.rows} record(s) under key "
        f"{secrecy.key_id(keys[0])}."
    )
    if source.path is not None:
        typer.echo(
            f"The new key is in {source.path}. Restart running agentkb processes, and copy the file to "
            "other hosts sharing this database."
        )
    elif len(source.keys) > 1:
        typer.echo("Drop the other keys from AGENTKB_SECRET_KEY and restart the agentkb processes.")
    else:
        typer.echo("Now set AGENTKB_SECRET_KEY to the new key above and restart the agentkb processes.")


async def _rotate(settings: Settings, box: SecretBox) -> SecretReport:
    from agentkb.service.platform import rotate_secrets
    from agentkb.storage import migrate
    from agentkb.storage.db import Database
    from agentkb.storage.embedded import EmbeddedPostgres

    embedded = None
    url = settings.database_url
    if url is None:
        embedded = EmbeddedPostgres(settings.pg_dir)
        url = await asyncio.to_thread(embedded.start)
    db = Database(url, pool_size=1)
    try:
        await asyncio.to_thread(migrate.upgrade, url)
        return await rotate_secrets(db, box)
    finally:
        await db.close()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)


app.command("rotate-secret")(rotate_secret)
