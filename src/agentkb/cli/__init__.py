"""The `agentkb` command line: `main` is the console entry point."""

from agentkb.cli.main import main

__all__ = ["main"]
