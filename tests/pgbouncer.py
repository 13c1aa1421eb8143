"""PgBouncer (Debian's `pgbouncer` package) in transaction mode in front of a PostgreSQL, for the tests:

    with pgbouncer("postgresql://postgres:@/postgres?host=/tmp/pg") as url:   # postgresql://postgres@127.0.0.1:<port>/postgres
        ...

Two pooled databases: the target's own name (`pool_size` server connections) and `tiny` (the same
database, one server connection: every client shares it, which makes a prepared statement's clash
certain). PgBouncer refuses to run as root: as root it runs as the wheel's `pgserver` user.
`PGBOUNCER` (a path) overrides the binary; `available()` says whether there is one."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

WAIT_S = 60.0


def binary() -> str | None:
    return os.environ.get("PGBOUNCER") or shutil.which("pgbouncer") or shutil.which("/usr/sbin/pgbouncer")


def version() -> str:
    found = binary()
    if found is None:
        return "none"
    return subprocess.run([found, "--version"], capture_output=True, text=True, check=True).stdout.split(
        "\n"
    )[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _target(url: str) -> tuple[str, int, str, str]:
    """host (or socket directory), port, database, user of a libpq URL."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    host = parts.hostname or query.get("host", ["/tmp"])[0]
    port = parts.port or int(query.get("port", ["5432"])[0])
    return host, port, parts.path.lstrip("/") or "postgres", parts.username or "postgres"


@contextmanager
def pgbouncer(target_url: str, *, pool_size: int = 20) -> Iterator[str]:
    """A PgBouncer in transaction mode listening on 127.0.0.1; yields the URL of the target's database
    through it (`tiny`: the same with one server connection)."""
    found = binary()
    if found is None:
        raise RuntimeError("pgbouncer is not installed (apt-get install pgbouncer)")
    host, port, database, user = _target(target_url)
    root = Path(tempfile.mkdtemp(prefix="agentkb-test-pgbouncer-"))
    root.chmod(0o755)
    listen = _free_port()
    server = f"host={host} port={port} dbname={database} user={user}"
    (root / "users.txt").write_text(f'"{user}" ""\n')
    (root / "pgbouncer.ini").write_text(
        "\n".join(
            [
                "[databases]",
                f"{database} = {server} pool_size={pool_size}",
                f"tiny = {server} pool_size=1",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {listen}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {root / 'users.txt'}",
                "pool_mode = transaction",
                "max_client_conn = 1000",
                f"default_pool_size = {pool_size}",
                "server_reset_query =",
                "ignore_startup_parameters = extra_float_digits",
                f"logfile = {root / 'pgbouncer.log'}",
                f"pidfile = {root / 'pgbouncer.pid'}",
                "",
            ]
        )
    )
    user_args = {}
    if os.geteuid() == 0:  # "PgBouncer should not run as root"
        entry = pwd.getpwnam("pgserver")
        for path in (root, *root.iterdir()):
            os.chown(path, entry.pw_uid, entry.pw_gid)
        user_args = {"user": entry.pw_uid, "group": entry.pw_gid}
    proc = subprocess.Popen(
        [found, str(root / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        **user_args,  # type: ignore[arg-type]
    )
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", listen), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = root / "pgbouncer.log"
                    text = log.read_text() if log.exists() else ""
                    raise RuntimeError(f"pgbouncer did not start: {text}") from None
                time.sleep(0.05)
        yield f"postgresql://{user}@127.0.0.1:{listen}/{database}"
    finally:
        proc.send_signal(signal.SIGTERM)  # immediate shutdown
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)
