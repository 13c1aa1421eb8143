"""docs/security.md names the tests that prove each control: every one of them exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

# `tests/x.py::test_name` names a file and a test; a bare `::test_name` after it is another test of that file
_REFERENCE = re.compile(r"(tests/[\w/]+\.py)?::(test_\w+)")


def _tests_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
    }


def test_every_test_named_in_the_threat_model_exists(repo_root: Path) -> None:
    text = (repo_root / "docs" / "security.md").read_text()
    current: str | None = None
    named: list[tuple[str, str]] = []
    for match in _REFERENCE.finditer(text):
        current = match.group(1) or current
        assert current is not None, f"::{match.group(2)} names no file"
        named.append((current, match.group(2)))
    assert len(named) > 40  # the page names its proofs; a parse that found none proves nothing
    missing = [f"{file}::{name}" for file, name in named if name not in _tests_of(repo_root / file)]
    assert missing == [], f"docs/security.md names tests that do not exist: {missing}"


def test_the_live_suite_tries_every_class(repo_root: Path) -> None:
    """Each attack class of docs/security.md (a `### ` section with a `live:` test) is run against the live
    server by tests/test_attacks.py."""
    text = (repo_root / "docs" / "security.md").read_text()
    sections = text.split("\n### ")[1:]
    live = _tests_of(repo_root / "tests" / "test_attacks.py")
    without = [s.splitlines()[0] for s in sections if "live:" in s and not any(t in s for t in live)]
    assert without == []
