"""`agentkb export KB FILE` and `agentkb import FILE [--as NAME]`: move a knowledge base — definition,
chunks, metadata and vectors — between servers, with a progress bar.

    agentkb export docs_kb docs.agentkb.jsonl.gz
    agentkb import docs.agentkb.jsonl.gz --as docs_copy --embedding-api-key "$OPENAI_API_KEY"

Without `--url` they work on the database `agentkb serve` uses (the embedded one in the data directory, or
AGENTKB_DATABASE_URL), directly; with `--url` they speak HTTP to that server (`GET …/export`, `POST
…/import`). The file leaves out secrets (the models' `api_key`s): an import needs them again. An export is
written to `FILE.part` and renamed when complete; an import is all or nothing.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, cast

import typer

if TYPE_CHECKING:
    import httpx
    from rich.progress import Progress

    from agentkb.service.container import Services

ProjectOption = Annotated[str, typer.Option(help="Project of the knowledge base.")]
DataDirOption = Annotated[
    Path | None, typer.Option(help="Data directory of the local database (default ~/.agentkb).")
]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url", help="Base URL of a running agentkb server; without it, the local database is used."
    ),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(envvar="AGENTKB_API_KEY", help="API key for a server with authentication on (with --url)."),
]


class TransferError(Exception):
    """A refusal to report and exit 1 on."""


@contextmanager
def _bar(what: str, unit_bytes: bool = False) -> Iterator[tuple[Progress, Any]]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TransferSpeedColumn,
    )

    console = Console(stderr=True)
    columns: list[Any] = [TextColumn(f"{what} [bold]{{task.description}}"), BarColumn()]
    columns += [DownloadColumn(), TransferSpeedColumn()] if unit_bytes else [MofNCompleteColumn(), "chunks"]
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        yield bar, console


def _client(url: str, api_key: str | None) -> httpx.Client:
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=httpx.Timeout(60, read=3600))


def _problem(response: httpx.Response) -> str:
    from agentkb.cli.ingest_job import problem

    response.read()
    return problem(response)


def _local(data_dir: Path | None, work: Any) -> Any:
    from agentkb.cli.keys import with_services

    return with_services(data_dir, work)


class _LineCounter:
    """Counts the records of an export file as its gzip bytes go by (the remote export's progress); the
    header's `chunks` gives the total."""

    def __init__(self) -> None:
        self._z = zlib.decompressobj(31)
        self.lines = 0
        self.total: int | None = None
        self._first = b""

    def feed(self, data: bytes) -> None:
        import orjson

        text = self._z.decompress(data)
        if self.lines == 0 and self.total is None:
            self._first += text.split(b"\n", 1)[0]
            if b"\n" in text:
                try:
                    self.total = int(orjson.loads(self._first).get("chunks") or 0)
                except (ValueError, AttributeError, TypeError):
                    self.total = 0
        self.lines += text.count(b"\n")

    @property
    def chunks(self) -> int:
        return max(self.lines - 1, 0)  # less the header


def export(
    kb: Annotated[str, typer.Argument(help="The knowledge base to export.")],
    file: Annotated[Path, typer.Argument(help="The file to write (conventionally `<kb>.agentkb.jsonl.gz`).")],
    project: ProjectOption = "mindsdb",
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = None,
    force: Annotated[bool, typer.Option("--force", help="Replace FILE if it exists.")] = False,
) -> None:
    """Export a knowledge base (definition, chunks, metadata, vectors; no secrets) to a file."""
    if file.exists() and not force:
        raise typer.BadParameter(f"{file} exists (give --force to replace it)", param_hint="FILE")
    part = file.with_name(file.name + ".part")
    try:
        with part.open("wb") as out, _bar("export") as (bar, _console):
            task = bar.add_task(kb, total=None)
            if url is None:
                count = _export_local(kb, project, data_dir, out, bar, task)
            else:
                count = _export_remote(kb, project, url, api_key, out, bar, task)
        part.replace(file)
    except TransferError as exc:
        part.unlink(missing_ok=True)
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    typer.echo(f"exported {project}.{kb}: {count:,} chunks to {file} ({file.stat().st_size:,} bytes)")


def _export_local(
    kb: str, project: str, data_dir: Path | None, out: IO[bytes], bar: Progress, task: Any
) -> int:
    done = [0]

    def progress(chunks: int, total: int | None) -> None:
        done[0] = chunks
        bar.update(task, completed=chunks, total=total)

    async def work(services: Services) -> int:
        stream = await services.transfer.export(project, kb, on_progress=progress)
        async for piece in stream:
            out.write(piece)
        return done[0]

    return cast(int, _local(data_dir, work))


def _export_remote(
    kb: str, project: str, url: str, api_key: str | None, out: IO[bytes], bar: Progress, task: Any
) -> int:
    import httpx

    counter = _LineCounter()
    try:
        with (
            _client(url, api_key) as client,
            client.stream("GET", f"/api/projects/{project}/knowledge_bases/{kb}/export") as response,
        ):
            if response.status_code != 200:
                raise TransferError(f"export refused: {_problem(response)}")
            for piece in response.iter_raw():
                out.write(piece)
                counter.feed(piece)
                bar.update(
                    task, completed=min(counter.chunks, counter.total or 0), total=counter.total or None
                )
    except httpx.TransportError as exc:
        raise TransferError(f"cannot reach agentkb at {url} (or the stream broke): {exc}") from exc
    if counter.total is None or counter.chunks != counter.total + 1:  # chunks and the end record
        raise TransferError("the server's stream ended early: the export is incomplete")
    return counter.total


def _secrets(
    embedding_api_key: str | None, reranking_api_key: str | None, secret: list[str]
) -> dict[str, str]:
    from agentkb.service.catalog import SECRET_FIELDS

    given: dict[str, str] = {}
    for item in secret:
        path, sep, value = item.partition("=")
        if not sep or not path:
            raise typer.BadParameter(
                f"expected PATH=VALUE, got {item.split('=')[0]!r}...", param_hint="--secret"
            )
        given[path] = value
    for field, key in (("embedding_api_key", embedding_api_key), ("reranking_api_key", reranking_api_key)):
        if key:
            given[SECRET_FIELDS[field]] = key
    return given


def import_(
    file: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, readable=True, help="An export file to import.")
    ],
    as_: Annotated[
        str | None, typer.Option("--as", help="Name of the new knowledge base (default: the exported name).")
    ] = None,
    project: Annotated[str, typer.Option(help="Project to import into.")] = "mindsdb",
    embedding_api_key: Annotated[
        str | None,
        typer.Option(
            envvar="AGENTKB_IMPORT_EMBEDDING_API_KEY",
            help="The embedding model's api_key (exports leave it out); needed when the model had one.",
        ),
    ] = None,
    reranking_api_key: Annotated[
        str | None,
        typer.Option(envvar="AGENTKB_IMPORT_RERANKING_API_KEY", help="The reranking model's api_key."),
    ] = None,
    secret: Annotated[
        list[str] | None,
        typer.Option(
            help="Any other left-out secret, PATH=VALUE (paths: the file header's secrets_omitted)."
        ),
    ] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Create a knowledge base from an export file, with its vectors (nothing is re-embedded)."""
    secrets = _secrets(embedding_api_key, reranking_api_key, secret or [])
    try:
        if url is None:
            record = _import_local(file, as_, project, secrets, data_dir)
        else:
            record = _import_remote(file, as_, project, secrets, url, api_key)
    except TransferError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(
        f"imported {record['project_name']}.{record['name']}: {record['document_count']:,} documents, "
        f"{record['chunk_count']:,} chunks"
    )
    for model, endpoint in (record.get("endpoints") or {}).items():  # where the given keys will go
        typer.echo(f"  {model}: {endpoint}")


def _import_local(
    file: Path, name: str | None, project: str, secrets: dict[str, str], data_dir: Path | None
) -> dict[str, Any]:
    with _bar("import") as (bar, _console), file.open("rb") as source:
        task = bar.add_task(file.name, total=None)

        def progress(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)

        async def work(services: Services) -> dict[str, Any]:
            imported = await services.transfer.import_kb(
                project, source, name=name, secrets=secrets, on_progress=progress
            )
            return {
                "project_name": imported.kb.project_name,
                "name": imported.kb.name,
                "document_count": imported.documents,
                "chunk_count": imported.chunks,
                "endpoints": imported.endpoints,
            }

        return cast(dict[str, Any], _local(data_dir, work))


def _import_remote(
    file: Path, name: str | None, project: str, secrets: dict[str, str], url: str, api_key: str | None
) -> dict[str, Any]:
    import httpx
    import orjson

    from agentkb.cli.ingest_job import Counting
    from agentkb.service.catalog import SECRET_FIELDS

    fields = {field: secrets.pop(path) for field, path in SECRET_FIELDS.items() if path in secrets}
    if secrets:
        fields["secrets"] = orjson.dumps(secrets).decode()
    if name:
        fields["name"] = name
    with _bar("upload", unit_bytes=True) as (bar, _console):
        task = bar.add_task(file.name, total=file.stat().st_size)
        body = Counting(file, lambda n: bar.advance(task, n))
        try:
            with _client(url, api_key) as client:
                response = client.post(
                    f"/api/projects/{project}/knowledge_bases/import",
                    data=fields,
                    files={"file": (file.name, cast(IO[bytes], body), "application/gzip")},
                )
        except httpx.TransportError as exc:
            raise TransferError(f"cannot reach agentkb at {url}: {exc}") from exc
        finally:
            body.close()
    if response.status_code != 201:
        raise TransferError(f"import refused: {_problem(response)}")
    return cast(dict[str, Any], response.json())
