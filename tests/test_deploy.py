"""deploy/: the image installs exactly as CI does, the compose file wires the API, the worker and PostgreSQL
as docs/operations.md says, and the Grafana dashboard charts only metrics agentkb exports.

No container runs here (no Docker engine); `docker compose config` (or docker-compose v1) validates the
compose file when a client is installed, else the test of its structure stands alone."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
SECRETS = {
    "POSTGRES_PASSWORD": "pg-secret",
    "AGENTKB_SECRET_KEY": "8yOMxCOpKOmJ1D2cLRqQjh9ngKk8p3lKMCa2ZgbYzR4=",
    "AGENTKB_USERNAME": "admin",
    "AGENTKB_PASSWORD": "pw",
}


def _install_pin() -> str:
    match = re.search(r"^TORCH_VERSION=(\S+)$", (ROOT / ".ci/install").read_text(), re.M)
    assert match, ".ci/install names no TORCH_VERSION"
    return match.group(1)


def test_image_and_ci_run_one_install_script_with_the_readmes_pin() -> None:
    install = (ROOT / ".ci/install").read_text()
    # torch (pinned) only for a target with the torch extra ('.[dev]' includes it); '.' installs without it
    assert '*torch* | *dev*) pip install "${extra[@]}" "torch==$TORCH_VERSION" -e "$target" ;;' in install
    assert '*) pip install -e "$target" ;;' in install and 'target="${1:-.}"' in install
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    runs = [line for line in dockerfile.splitlines() if line.startswith("RUN") and ".ci/install" in line]
    assert runs == ['RUN TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu .ci/install "$INSTALL_TARGET"']
    assert "ARG INSTALL_TARGET=.\n" in dockerfile  # torch-free by default
    assert "pip install" not in dockerfile  # nothing installed beside the shared step
    ci = [
        line
        for line in (ROOT / ".ci/run").read_text().splitlines()
        if "install" in line and not line.startswith("#")
    ]
    assert any(line.startswith(".ci/install '.[dev]'") for line in ci), ci
    assert not any(line.startswith("pip install") for line in ci)
    pin = _install_pin()
    readme = (ROOT / "README.md").read_text()
    assert "pip install -e . && agentkb serve" in readme
    assert f"pip install torch=={pin} -e '.[dev]' && python -m pytest" in readme
    # the image copies what the install step needs, and runs as a user that is not root
    assert "COPY .ci/install .ci/install" in dockerfile and "COPY src src" in dockerfile
    users = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert {"*", "!pyproject.toml", "!README.md", "!.ci/install", "!src/"} <= set(ignored)


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_compose_wires_api_worker_and_pgvector() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", "api", "worker"}
    postgres, api, worker = services["postgres"], services["api"], services["worker"]
    assert postgres["image"].startswith("pgvector/pgvector:")
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert any(v.endswith(":/var/lib/postgresql/data") for v in postgres["volumes"])

    assert api["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert api["command"][:2] == ["agentkb", "serve"] and worker["command"] == ["agentkb", "worker"]
    assert worker["image"] == api["image"]
    assert "http://127.0.0.1:47334/health/ready" in " ".join(api["healthcheck"]["test"])
    assert api["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert worker["depends_on"]["api"]["condition"] == "service_healthy"  # migrations applied first
    for service in (api, worker):
        env = service["environment"]
        for name in ("AGENTKB_SECRET_KEY", "AGENTKB_USERNAME", "AGENTKB_PASSWORD"):
            assert env[name] == f"${{{name}:?" + env[name].split(":?", 1)[1], f"{name} must come from env"
        assert env["AGENTKB_DATABASE_URL"].startswith("postgresql://agentkb:${POSTGRES_PASSWORD:?")
        assert "@postgres:5432/agentkb" in env["AGENTKB_DATABASE_URL"]
        assert "agentkb-data:/data" in service["volumes"]  # uploads reach the worker
    assert api["environment"]["AGENTKB_WORKER_ENABLED"] == "false"
    assert set(_compose()["volumes"]) == {"pgdata", "agentkb-data"}


def _compose_client() -> list[str] | None:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_compose_config_validates_and_refuses_missing_secrets() -> None:
    client = _compose_client()
    if client is None:
        pytest.skip("no docker compose client installed (the structural test above still ran)")
    base = {k: v for k, v in os.environ.items() if k not in SECRETS}
    cmd = [*client, "-f", str(DEPLOY / "compose.yaml"), "config"]
    ok = subprocess.run(cmd, env={**base, **SECRETS}, capture_output=True, text=True, cwd=DEPLOY)
    assert ok.returncode == 0, ok.stderr
    rendered = yaml.safe_load(ok.stdout)
    assert rendered["services"]["api"]["environment"]["AGENTKB_SECRET_KEY"] == SECRETS["AGENTKB_SECRET_KEY"]
    missing = subprocess.run(cmd, env=base, capture_output=True, text=True, cwd=DEPLOY)
    assert missing.returncode != 0 and "POSTGRES_PASSWORD" in missing.stderr + missing.stdout


def test_grafana_dashboard_charts_exported_metrics() -> None:
    from prometheus_client.metrics import MetricWrapperBase

    from agentkb import metrics

    exported: set[str] = set()
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            for family in value.describe():
                exported |= _series(family.name, family.type)
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    assert len(exprs) >= 8
    used = {name for expr in exprs for name in re.findall(r"\bagentkb_[a-z_]+\b", expr)}
    assert used and used <= exported, used - exported
    assert dashboard["uid"] and dashboard["title"]


def _series(name: str, kind: str) -> set[str]:
    if kind == "counter":
        return {f"{name}_total"}
    if kind == "histogram":
        return {f"{name}_bucket", f"{name}_count", f"{name}_sum"}
    return {name}
