"""Stored secrets over time, each test on a database of its own: rows stored in plain text before
encryption keep working and are sealed at the next start; `agentkb keys rotate-secret` re-encrypts
everything under a new key (key file and AGENTKB_SECRET_KEY alike); a process with the wrong key fails
clearly, naming key ids, never a secret."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.types.json import Jsonb
from pydantic import SecretStr

from agentkb import secrecy
from tests import externals
from tests.conftest import ServedApp
from tests.openai_stub import OpenAIStub, text
from tests.secret_helpers import fresh_database, libpq, stored_json

MASK = "******"
P = "/api/projects/mindsdb"


@dataclass
class Setup:
    u: str
    url: str
    llm: OpenAIStub
    embed: OpenAIStub
    source: dict[str, Any]  # the data source's parameters, without the password
    agent_key: str
    kb_key: str
    password: str

    @property
    def secrets(self) -> list[str]:
        return [self.agent_key, self.kb_key, self.password]

    def agent_model(self) -> dict[str, Any]:
        return {
            "provider": "openai",
            "model_name": "gpt-stub",
            "api_key": self.agent_key,
            "base_url": self.llm.base_url,
        }

    def embedding_model(self) -> dict[str, Any]:
        return {
            "provider": "openai",
            "model_name": "stub",
            "base_url": self.embed.url,
            "dimensions": 8,
            "api_key": self.kb_key,
        }

    def data_source(self) -> dict[str, Any]:
        return {**self.source, "password": self.password}

    def create(self, c: httpx.Client) -> None:
        kb = {"name": "kb", "embedding_model": self.embedding_model()}
        assert c.post(f"{P}/knowledge_bases", json={"knowledge_base": kb}).status_code == 201
        rows = [
            {"id": 1, "content": "Tides follow the moon."},
            {"id": 2, "content": "Rust needs iron and oxygen."},
        ]
        assert c.put(f"{P}/knowledge_bases/kb", json={"knowledge_base": {"rows": rows}}).status_code == 200
        agent = {"name": "agent", "model": self.agent_model()}
        assert c.post(f"{P}/agents", json={"agent": agent}).status_code == 201
        ds = {"database": {"name": "ds", "engine": "postgres", "parameters": self.data_source()}}
        assert c.post("/api/databases", json=ds).status_code == 201

    def check(self, c: httpx.Client) -> None:
        """Everything works with the real secrets, and only the agent record shows one."""
        self.llm.script(text("The moon."))
        answer = c.post(
            f"{P}/agents/agent/completions", json={"messages": [{"question": "tides?", "answer": None}]}
        )
        assert answer.status_code == 200 and answer.json()["message"]["content"] == "The moon.", answer.text
        assert self.llm.requests[0].headers["authorization"] == f"Bearer {self.agent_key}"
        self.embed.reset()
        hits = c.post(f"{P}/knowledge_bases/kb/search", json={"query": "what moves the sea"})
        assert hits.status_code == 200 and len(hits.json()) == 2, hits.text
        assert self.embed.requests[0].headers["authorization"] == f"Bearer {self.kb_key}"
        query = {"query": f"SELECT body FROM ds.sec_{self.u}", "context": {"db": "mindsdb"}}
        assert c.post("/api/sql/query", json=query).json()["data"] == [["reachable"]]
        assert c.get(f"{P}/agents/agent").json()["model"]["api_key"] == self.agent_key
        shown = c.get(f"{P}/knowledge_bases/kb").text + c.get("/api/databases/ds").text
        assert MASK in shown and not [s for s in self.secrets if s in shown]


@pytest.fixture()
def setup(pg_url: str, pg_source: dict[str, Any]) -> Iterator[Setup]:
    u = uuid.uuid4().hex[:8]
    with (
        OpenAIStub() as llm,
        OpenAIStub() as embed,
        externals.table("postgres", pg_source, f"sec_{u}", "id int, body text", [(1, "reachable")]),
        fresh_database(pg_url, f"agentkb_sec_{u}") as url,
    ):
        yield Setup(u, url, llm, embed, pg_source, f"sk-rot-agent-{u}", f"rot-kb-key-{u}", f"Rot-Pw-{u}")


def _served(settings: Any) -> tuple[ServedApp, httpx.Client]:
    app = ServedApp(settings).__enter__()
    return app, httpx.Client(base_url=app.url, timeout=120)


def _stop(app: ServedApp, client: httpx.Client) -> None:
    client.close()
    app.__exit__(None, None, None)


def _key_ids(url: str) -> set[str]:
    return set(re.findall(r"enc:v1:([0-9a-f]{8}):", stored_json(url)))


def test_plaintext_rows_from_before_keep_working_and_are_sealed_at_start(
    setup: Setup, settings: Any, tmp_path: Path
) -> None:
    config = settings.model_copy(update={"database_url": setup.url, "data_dir": tmp_path})
    app, c = _served(config)
    try:
        setup.create(c)
        assert not [s for s in setup.secrets if s in stored_json(setup.url)]
        # Make the rows what a database from before this change holds: the secrets in plain text.
        with psycopg.connect(libpq(setup.url), autocommit=True) as conn:
            conn.execute("UPDATE agents SET model = %s", (Jsonb(setup.agent_model()),))
            conn.execute("UPDATE knowledge_bases SET embedding_model = %s", (Jsonb(setup.embedding_model()),))
            conn.execute("UPDATE data_sources SET parameters = %s", (Jsonb(setup.data_source()),))
        assert all(s in stored_json(setup.url) for s in setup.secrets)
        setup.check(c)  # readable as they are
    finally:
        _stop(app, c)
    app, c = _served(config)  # the next start seals them
    try:
        stored = stored_json(setup.url)
        assert not [s for s in setup.secrets if s in stored] and stored.count("enc:v1:") == 3, stored
        setup.check(c)
    finally:
        _stop(app, c)


def _rotate(data_dir: Path, url: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKB_")}
    return subprocess.run(
        [sys.executable, "-m", "agentkb", "keys", "rotate-secret", "--data-dir", str(data_dir)],
        env={**clean, "AGENTKB_DATABASE_URL": url, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_rotate_secret_re_encrypts_everything(setup: Setup, settings: Any, tmp_path: Path) -> None:
    config = settings.model_copy(update={"database_url": setup.url, "data_dir": tmp_path, "secret_key": None})
    key_file = tmp_path / "secret.key"
    app, c = _served(config)  # no AGENTKB_SECRET_KEY: a key file is generated
    try:
        setup.create(c)
    finally:
        _stop(app, c)
    assert key_file.stat().st_mode & 0o777 == 0o600
    (old,) = secrecy.load_keys(config, create=False).keys
    assert _key_ids(setup.url) == {secrecy.key_id(old)}

    done = _rotate(tmp_path, setup.url)
    assert done.returncode == 0, done.stderr
    (new,) = secrecy.load_keys(config, create=False).keys
    assert new != old and key_file.stat().st_mode & 0o777 == 0o600
    assert f"under key {secrecy.key_id(new)}" in done.stdout and new not in done.stdout + done.stderr
    stored = stored_json(setup.url)
    assert _key_ids(setup.url) == {secrecy.key_id(new)} and not [s for s in setup.secrets if s in stored]
    app, c = _served(config)
    try:
        setup.check(c)
    finally:
        _stop(app, c)

    # A process still on the old key does not start (tests/test_secret_keys.py); let through, it answers
    # clear errors naming the key ids, no secret, no crash.
    app, c = _served(
        config.model_copy(update={"secret_key": SecretStr(old), "allow_unknown_secret_keys": True})
    )
    try:
        r = c.post(
            f"{P}/agents/agent/completions", json={"messages": [{"question": "tides?", "answer": None}]}
        )
        assert r.status_code == 500 and r.json()["title"] == "Secret cannot be decrypted", r.text
        assert secrecy.key_id(new) in r.json()["detail"] and secrecy.key_id(old) in r.json()["detail"]
        assert c.get(f"{P}/agents/agent").json()["model"]["api_key"] == MASK
        query = {"query": f"SELECT body FROM ds.sec_{setup.u}", "context": {"db": "mindsdb"}}
        answer = c.post("/api/sql/query", json=query).json()
        assert answer["type"] == "error" and secrecy.key_id(new) in answer["error_message"], answer
        assert c.get("/api/status").status_code == 200
        assert not [s for s in setup.secrets + [old, new] if s in r.text + str(answer)]
    finally:
        _stop(app, c)

    # With AGENTKB_SECRET_KEY the new key is printed for the user to set; the key file is left alone.
    done = _rotate(tmp_path, setup.url, AGENTKB_SECRET_KEY=new)
    assert done.returncode == 0, done.stderr
    printed = re.findall(r"^\s+([A-Za-z0-9_-]{43}=)$", done.stdout, re.MULTILINE)
    assert len(printed) == 1 and printed[0] != new, done.stdout
    assert _key_ids(setup.url) == {secrecy.key_id(printed[0])}
    assert secrecy.load_keys(config, create=False).keys == [new]
    app, c = _served(config.model_copy(update={"secret_key": SecretStr(printed[0])}))
    try:
        setup.check(c)
    finally:
        _stop(app, c)

    # "new,old": everything moves to the first key; a key the command lacks changes nothing.
    third = secrecy.generate_key()
    done = _rotate(tmp_path, setup.url, AGENTKB_SECRET_KEY=f"{third},{printed[0]}")
    assert done.returncode == 0 and _key_ids(setup.url) == {secrecy.key_id(third)}, done.stderr
    done = _rotate(tmp_path, setup.url, AGENTKB_SECRET_KEY=old)
    assert (
        done.returncode == 1 and "Nothing was changed" in done.stderr and secrecy.key_id(third) in done.stderr
    )
    assert _key_ids(setup.url) == {secrecy.key_id(third)}
    before = key_file.read_text()
    done = _rotate(tmp_path, setup.url)  # nor is the key file's key: the file stays as it was
    assert done.returncode == 1 and "Nothing was changed" in done.stderr and key_file.read_text() == before
