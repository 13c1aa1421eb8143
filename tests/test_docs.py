"""The configuration reference is generated from `Settings`; the README opens with the two commands."""

from __future__ import annotations

from pathlib import Path

from agentkb.settings import Settings
from agentkb.settings_doc import BEGIN, END, settings_table, with_table


def test_every_setting_is_in_the_generated_configuration_table(repo_root: Path) -> None:
    docs = (repo_root / "docs" / "configuration.md").read_text()
    table = docs.split(BEGIN, 1)[1].split(END, 1)[0]
    for name, field in Settings.model_fields.items():
        assert f"| `AGENTKB_{name.upper()}` |" in table, (
            f"AGENTKB_{name.upper()} missing from docs/configuration.md"
        )
        assert field.description, f"Settings.{name} has no description (its text in docs/configuration.md)"
    assert docs == with_table(docs), (
        "docs/configuration.md's table is stale: run `python -m agentkb.settings_doc`"
    )


def test_settings_table_shows_defaults_as_the_environment_takes_them() -> None:
    rows = {
        line.split(" | ")[0].strip("| `"): line.split(" | ")[1] for line in settings_table().splitlines()[2:]
    }
    assert rows["AGENTKB_PORT"] == "`47334`"
    assert rows["AGENTKB_MAX_BODY_BYTES"] == "`67108864` (64 MiB)"
    assert rows["AGENTKB_WORKER_ENABLED"] == "`true`"
    assert rows["AGENTKB_DATABASE_URL"] == "unset"
    assert rows["AGENTKB_ALLOWED_HOSTS"] == "empty"
    assert rows["AGENTKB_DATA_SOURCE_FILE_DIR"] == "`<data_dir>/databases`"
    assert (
        rows["AGENTKB_DEFAULT_EMBEDDING_MODEL"] == '`{"provider": "local", "model_name": "all-MiniLM-L6-v2"}`'
    )


def test_readme_links_to_the_configuration_reference_instead_of_repeating_it(repo_root: Path) -> None:
    readme = (repo_root / "README.md").read_text()
    assert "](docs/configuration.md)" in readme
    assert "| Variable | Default | Meaning |" not in readme


def test_readme_opens_with_the_two_commands(repo_root: Path) -> None:
    readme = (repo_root / "README.md").read_text()
    blocks = [b.split("```")[0].strip() for b in readme.split("```sh")[1:3]]
    assert blocks[0] == "pip install -e . && agentkb serve"  # torch-free: the ONNX embedder
    assert blocks[1] == "pip install torch==2.13.0 -e '.[dev]' && python -m pytest"
    ci = (repo_root / ".ci" / "run").read_text().splitlines()
    install, run_tests = blocks[1].split(" && ")
    # .ci/run runs the same two commands (in its own virtualenv, with the lint gates between them); the
    # install through .ci/install, the script the image (deploy/Dockerfile) runs too
    script = (repo_root / ".ci" / "install").read_text()
    pin = install.removeprefix("pip install torch==").split()[0]
    assert f"TORCH_VERSION={pin}\n" in script and '"torch==$TORCH_VERSION" -e "$target"' in script
    assert 'pip install -e "$target"' in script  # the default target ('.') without torch
    install_line = next(i for i, line in enumerate(ci) if line.startswith(".ci/install '.[dev]'"))
    assert any(line.startswith(run_tests) for line in ci), ci
    assert install_line < next(i for i, line in enumerate(ci) if line.startswith(run_tests))
