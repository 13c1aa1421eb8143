"""Parsing an uploaded file in a child process, with a time budget.

A parse runs library code (pypdf, python-docx, python-pptx, openpyxl, lxml) and our own on bytes a user
chose; some inputs make that code run for minutes. A thread cannot be stopped, and a check between rows
never runs while a library call is stuck inside one part. So each parse runs in a process of its own, forked
from multiprocessing's `forkserver` (a clean process with no threads, sockets or event loop, which has the
parser modules imported already, so a fork costs milliseconds): past `ParseLimits.timeout_s` it is killed
and the upload answered with 413 naming the limit. The parsed file comes back pickled through a pipe; the
parse's own errors (400 for a bad file, 413 past a size limit) come back as they were raised.
"""

from __future__ import annotations

import multiprocessing
import sys
from multiprocessing.connection import Connection
from pathlib import Path

from agentkb.errors import AgentKBError, BadRequest, PayloadTooLarge
from agentkb.ingest.files.bounds import ParseLimits
from agentkb.ingest.files.parse import ParsedFile, parse_file

# imported once by the fork server; `__main__` too, or each child would run the main script again first
PRELOAD = ["__main__", "agentkb.ingest.files.parse", "docx", "pptx", "openpyxl", "pypdf", "lxml.html"]


def _context() -> multiprocessing.context.BaseContext:
    if sys.platform == "win32":  # pragma: no cover - no forkserver there
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)  # read when the fork server starts (once per process)
    return context


def _child(conn: Connection, path: str, name: str, extension: str, limits: ParseLimits) -> None:
    try:
        result: tuple[str, object] = ("ok", parse_file(Path(path), name, extension, limits))
    except AgentKBError as exc:
        result = ("error", exc)
    except MemoryError:
        result = ("error", PayloadTooLarge(f"File {name} needs more memory to parse than there is"))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it as a 400
        result = ("error", BadRequest(f"File {name} could not be parsed: {type(exc).__name__}: {exc}"))
    conn.send(result)
    conn.close()


def parse_isolated(path: Path, name: str, extension: str, limits: ParseLimits) -> ParsedFile:
    """`parse_file` in a child process, killed past `limits.timeout_s` (413). Blocking: call it in a thread."""
    context = _context()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(  # type: ignore[attr-defined]
        target=_child, args=(sender, str(path), name, extension, limits), daemon=True, name="agentkb-parse"
    )
    try:
        process.start()
        sender.close()  # the child's end: EOF here once the child is gone
        if not receiver.poll(limits.timeout_s):
            raise PayloadTooLarge(
                f"File {name}: parsing took longer than {limits.timeout_s:g} s (the limit for one file, "
                "AGENTKB_PARSE_TIMEOUT_S)",
                title="File too costly to parse",
            )
        try:
            status, value = receiver.recv()
        except EOFError:
            process.join(5)
            raise BadRequest(
                f"File {name} could not be parsed: the parser process ended (exit code {process.exitcode})",
                title="Invalid file",
            ) from None
    finally:
        sender.close()
        receiver.close()
        if process.pid is not None:  # started
            if process.is_alive():  # it overran
                process.kill()
            process.join()
            process.close()
    if status == "error" and isinstance(value, AgentKBError):
        raise value
    if status != "ok" or not isinstance(value, ParsedFile):
        raise BadRequest(f"File {name} could not be parsed", title="Invalid file")
    return value
