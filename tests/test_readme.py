"""The README's walk-through, run as written, answers as the README shows.

Every fenced block preceded by `<!-- walkthrough -->` is taken, in order, and run in ONE bash (```python
blocks through `python - <<'EOF'`), in an empty directory, with `agentkb` and `python` on the PATH meaning
this interpreter and this checkout. So the README's own `agentkb serve &` starts the server: on a free port
(`AGENTKB_PORT`) with a fresh data directory (`AGENTKB_DATA_DIR`); the README's `127.0.0.1:47334` and its
docs site's port 8000 are rewritten to free ports.

A block is cut into steps: a step is a run of code lines (no blank or comment line between them); the
`#` lines right after it are its shown output. A comment after a blank line (or after another such comment)
explains and is not checked. Each step must exit 0 (every command in it: an ERR trap stops the script at the
first failure), and its stdout must match its shown output: `...` matches any text (newlines too), a run of
whitespace any whitespace (or none), everything else itself. A ```python block is one step whose shown
output is all its `#` output lines, in order.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.conftest import free_port

MARK = "<!-- walkthrough -->"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
README_PORT = "127.0.0.1:47334"
SITE_PORTS = ("127.0.0.1:8000", "http.server 8000")
SCRIPT_TIMEOUT_S = 300


@dataclass
class Step:
    block: int  # 1-based, among the walk-through's blocks
    lang: str
    code: str
    shown: str | None  # the output the README shows; None: not shown, only the exit status is checked


def fenced_blocks(readme: str) -> list[tuple[str, str, bool]]:
    """(language, body, marked) of every fenced block, in order."""
    return [
        (m.group(1), m.group(2), readme[: m.start()].rstrip().endswith(MARK)) for m in FENCE.finditer(readme)
    ]


def _output_line(line: str) -> str:
    return line[2:] if line.startswith("# ") else line[1:]


def split_steps(body: str) -> list[tuple[str, str | None]]:
    """(code, shown output or None) for each step of a block."""
    steps: list[tuple[str, str | None]] = []
    code: list[str] = []
    shown: list[str] = []
    previous = "blank"  # blank | explanation | code | output

    def flush() -> None:
        if code:
            steps.append(("\n".join(code), "\n".join(shown) if shown else None))
        code.clear()
        shown.clear()

    for line in body.splitlines():
        if not line.strip():
            flush()
            previous = "blank"
        elif line.lstrip().startswith("#"):
            if previous in ("code", "output"):
                shown.append(_output_line(line.lstrip()))
                previous = "output"
            else:
                flush()
                previous = "explanation"
        else:
            if previous == "output":
                flush()
            code.append(line)
            previous = "code"
    flush()
    return steps


def walkthrough(readme: str, port: int, site_port: int) -> list[Step]:
    steps: list[Step] = []
    marked = [(lang, body) for lang, body, is_marked in fenced_blocks(readme) if is_marked]
    for n, (lang, body) in enumerate(marked, start=1):
        body = body.replace(README_PORT, f"127.0.0.1:{port}")
        for site in SITE_PORTS:
            body = body.replace(site, site.replace("8000", str(site_port)))
        assert "47334" not in body and "8000" not in body, f"walk-through block {n}: a port not rewritten"
        parts = split_steps(body)
        if lang == "python":
            shown = [s for _, s in parts if s is not None]
            steps.append(Step(n, lang, body, "\n".join(shown) if shown else None))
        else:
            assert lang == "sh", f"walk-through block {n} is ```{lang}; only sh and python blocks can be run"
            steps.extend(Step(n, lang, code, shown) for code, shown in parts)
    return steps


def _chunk(text: str) -> re.Pattern[str]:
    tokens = re.split(r"(\s+)", text.strip())
    return re.compile("".join(r"\s*" if t.isspace() else re.escape(t) for t in tokens if t))


def mismatch(shown: str, actual: str) -> str | None:
    """None when `actual` matches `shown`; else the part of `shown` that was not found where it should be.
    The literal pieces between `...` are found in order, leftmost first (no backtracking); the first must
    start the output and the last must end it."""
    actual = actual.strip()
    pieces = shown.strip().split("...")
    pos = 0
    for i, piece in enumerate(pieces):
        rx = _chunk(piece)
        if len(pieces) == 1:
            found = rx.fullmatch(actual)
        elif i == 0:
            found = rx.match(actual)
        elif i == len(pieces) - 1:
            found = re.compile(rx.pattern + r"\Z").search(actual, pos)
        else:
            found = rx.search(actual, pos)
        if found is None:
            return piece.strip() or "(end of output)"
        pos = found.end()
    return None


def test_shown_output_matching() -> None:
    assert mismatch('{"a":1,...}', '{"a":1,"b":2}') is None
    assert mismatch('{"a":1,\n "b":2}', '{"a":1,"b":2}') is None  # wrapped lines
    assert mismatch("...\ndata: {...}", "data: {}\n\ndata: {1}") is None
    assert mismatch("204", "204\n") is None
    assert mismatch('{"a":1,...}', '{"a":2,"b":1}') == '{"a":1,'
    assert mismatch("...,2]", "[1,2,3]") == ",2]"
    assert mismatch("204", "2040") == "204"


def _tool(bin_dir: Path, name: str, command: str) -> None:
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
    path.chmod(0o755)


def _stop_group(pgid: int) -> bool:
    """SIGTERM the script's process group (bash and what it left running), SIGKILL after 30 s.
    True when nothing of it was left to stop."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    return False


def _postgres_of(directory: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(attrs=("name", "cmdline")):
        if proc.info["name"] == "postgres" and str(directory) in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
    return found


def _report(step: Step, n: int, out: Path, why: str) -> str:
    def tail(path: Path, size: int = 4000) -> str:
        return path.read_text(errors="replace")[-size:] if path.exists() else ""

    return (
        f"README walk-through block {step.block}, command group #{n + 1}: {why}\n--- command\n{step.code}\n"
        f"--- shown in the README\n{step.shown}\n--- stdout\n{tail(out / f'{n}.out')}\n"
        f"--- stderr\n{tail(out / f'{n}.err')}\n"
        f"--- agentkb.log (tail)\n{tail(out.parent / 'agentkb.log', 2000)}"
    )


@pytest.mark.skipif(shutil.which("curl") is None, reason="the README's walk-through needs curl")
def test_readme_walkthrough_runs_as_shown(repo_root: Path) -> None:
    readme = (repo_root / "README.md").read_text()
    blocks = fenced_blocks(readme)
    for i, (lang, body, marked) in enumerate(blocks[2:], start=3):  # the first two: install+serve, the tests
        if lang in ("sh", "python"):
            assert marked, f"README block {i} (```{lang}) is not marked {MARK}, so nothing checks it:\n{body}"

    port, site_port = free_port(), free_port()
    steps = walkthrough(readme, port, site_port)
    assert "agentkb serve" in steps[0].code, "the walk-through starts its own server first"
    assert "kill" in steps[-1].code, "the walk-through stops its background processes last"
    assert sum(s.shown is not None for s in steps) >= 30, "the README shows fewer answers than it did"

    work = Path(tempfile.mkdtemp(prefix="agentkb-readme-"))
    work.chmod(0o755)  # the embedded PostgreSQL runs as its own user, under <work>/data/pg
    out, bin_dir = work / ".steps", work / ".bin"
    out.mkdir()
    bin_dir.mkdir()
    _tool(bin_dir, "python", shlex.quote(sys.executable))
    _tool(bin_dir, "agentkb", f"{shlex.quote(sys.executable)} -m agentkb")

    script = [
        "set -E -o pipefail",
        f"trap 'echo $__step > {shlex.quote(str(out / 'failed'))}; exit 1' ERR",
    ]
    for n, step in enumerate(steps):
        code = step.code if step.lang == "sh" else f"python - <<'README_PY'\n{step.code}\nREADME_PY"
        redirect = f"> {shlex.quote(str(out / f'{n}.out'))} 2> {shlex.quote(str(out / f'{n}.err'))}"
        script += [f"__step={n}", "{", code, f"}} {redirect}"]
    (out / "walkthrough.sh").write_text("\n".join(script) + "\n")

    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKB_")}
    env.update(
        AGENTKB_PORT=str(port),
        AGENTKB_DATA_DIR=str(work / "data"),
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=os.pathsep.join(p for p in (str(repo_root / "src"), env.get("PYTHONPATH")) if p),
        HF_HUB_OFFLINE="1",
    )
    proc = subprocess.Popen(
        ["bash", str(out / "walkthrough.sh")],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    left_running = False
    try:
        try:
            script_out = proc.communicate(timeout=SCRIPT_TIMEOUT_S)[0].decode(errors="replace")
        except subprocess.TimeoutExpired:
            script_out = f"(timed out after {SCRIPT_TIMEOUT_S} s)"
        left_running = not _stop_group(proc.pid)

        failed = out / "failed"
        if failed.exists():
            n = int(failed.read_text())
            raise AssertionError(_report(steps[n], n, out, "a command failed") + f"\n--- bash\n{script_out}")
        assert proc.returncode == 0, f"the walk-through script did not finish: {script_out}"
        for n, step in enumerate(steps):
            if step.shown is not None:
                missing = mismatch(step.shown, (out / f"{n}.out").read_text(errors="replace"))
                assert missing is None, _report(step, n, out, f"the output does not show {missing!r}")
        assert not left_running, "the walk-through left processes running (its last block stops them)"
        assert not _postgres_of(work), "the walk-through left the embedded PostgreSQL running"
    finally:
        _stop_group(proc.pid)
        for pg in _postgres_of(work):
            pg.send_signal(signal.SIGINT)  # a fast shutdown
        psutil.wait_procs(_postgres_of(work), timeout=30)
        shutil.rmtree(work, ignore_errors=True)
