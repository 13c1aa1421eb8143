"""Every setting is documented, in docs/configuration.md and in the README's table."""

from __future__ import annotations

from pathlib import Path

from agentkb.settings import Settings


def test_every_setting_is_documented(repo_root: Path) -> None:
    docs = (repo_root / "docs" / "configuration.md").read_text()
    readme = (repo_root / "README.md").read_text()
    for name in Settings.model_fields:
        variable = f"`AGENTKB_{name.upper()}`"
        assert variable in docs, f"{variable} missing from docs/configuration.md"
        assert variable in readme, f"{variable} missing from the README's configuration table"


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
