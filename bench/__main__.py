"""`python -m bench <name> [options]`: run one benchmark (or `all`)."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = ("startup",)


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in (*BENCHMARKS, "all"):
        print(f"usage: python -m bench {{{'|'.join((*BENCHMARKS, 'all'))}}} [options]")
        raise SystemExit(2)
    name, rest = sys.argv[1], sys.argv[2:]
    for bench in BENCHMARKS if name == "all" else (name,):
        importlib.import_module(f"bench.{bench}").main(rest)


main()
