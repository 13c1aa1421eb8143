"""`python -m bench <name> [options]`: run one benchmark (or `all`). `--quick` runs small sizes
(each benchmark's own `--quick`; `startup` gets `--repeat 1`). `all --quick` leaves out `peer`."""

from __future__ import annotations

import importlib
import sys

from bench.common import BENCHMARKS, set_command

SKIPPED_BY_ALL_QUICK = {
    "peer",
    "search100k",
    "search1m",
    "halfvec1m",
}  # compares with a server of one's own: run it by name
QUICK_ARGS = {"startup": ["--repeat", "1"]}  # benchmarks without a --quick option of their own


def main() -> None:
    if len(sys.argv) >= 2 and sys.argv[1] == "report":
        importlib.import_module("bench.report").main(sys.argv[2:])
        return
    if len(sys.argv) < 2 or sys.argv[1] not in (*BENCHMARKS, "all"):
        print(f"usage: python -m bench {{{'|'.join((*BENCHMARKS, 'all'))}}} [--quick] [options]")
        raise SystemExit(2)
    name, rest = sys.argv[1], sys.argv[2:]
    quick = "--quick" in rest
    rest = [a for a in rest if a != "--quick"]
    if name == "all" and rest:
        print("python -m bench all takes no options but --quick (run one benchmark to pass its options)")
        raise SystemExit(2)
    for bench in BENCHMARKS if name == "all" else (name,):
        if name == "all" and quick and bench in SKIPPED_BY_ALL_QUICK:
            continue
        args = [*rest, *QUICK_ARGS.get(bench, ["--quick"])] if quick else rest
        set_command(bench, args)
        importlib.import_module(f"bench.{bench}").main(args)


main()
