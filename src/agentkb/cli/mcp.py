"""`agentkb mcp`: the MCP server (`api/mcp.py`) over stdio, for clients that start it themselves (Claude
Desktop, Cursor, an IDE). It opens the database `agentkb serve` uses (the data directory, or
`AGENTKB_DATABASE_URL`) with the same services, without the ingestion worker; no credential is asked, as
for `agentkb keys`: whoever can start it can read the data directory anyway. Logs go to stderr, stdout
carries the protocol."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Annotated

import typer


def mcp(
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (default ~/.agentkb).")] = None,
) -> None:
    """Serve the MCP tools (knowledge bases, search, read-only SQL, agents) over stdin/stdout."""
    from agentkb.api.mcp import build_server
    from agentkb.cli.keys import settings_for
    from agentkb.logs import configure
    from agentkb.runtime import open_runtime
    from agentkb.service.container import Services

    settings = settings_for(data_dir)
    configure(settings.log_level, settings.log_format)

    async def run() -> None:
        async with open_runtime(settings, run_worker=False) as services:
            held: Services = services
            await build_server(lambda: held).run_stdio_async()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
