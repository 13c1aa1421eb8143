"""`python -m bench report`: write docs/benchmarks.md from the newest result file of each benchmark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.common import BENCHMARKS, RESULTS

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
ORDER = tuple(b for b in BENCHMARKS if b != "search100k")  # search100k: written by hand, below KEPT
# Sections written by hand (measurements no result file renders whole) follow this line and are kept.
KEPT = "<!-- written by hand below: `python -m bench report` keeps what follows -->"


def _table(rows: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in rows]
    return lines


def _cpu(machine: dict[str, Any]) -> str:
    """The CPU's name, with its family/model and features where the result recorded them."""
    name = str(machine.get("cpu", "?"))
    more = [str(machine["cpu_family_model"])] if machine.get("cpu_family_model") else []
    more += list(machine.get("cpu_features") or [])
    return f"{name} ({', '.join(more)})" if more else name


def main(argv: list[str]) -> None:
    out = [
        "# Benchmarks",
        "",
        "Produced by `python -m bench <name>` (tables below: the newest result file of each, under",
        "`bench/results/`; regenerate this page with `python -m bench report`). `python -m bench all --quick`",
        "runs everything but `peer` with small sizes (about 6½ minutes on the 2-core machine below, 2026-11-22).",
        "Full runs first, then the newest quick run of each. Figures are wall-clock on the machine named under each",
        "table; on a shared 2-core machine they are noisy — compare ratios taken in the same run.",
        "",
    ]
    for name in ORDER:
        full = sorted(f for f in RESULTS.glob(f"{name}-*.json") if "-quick-" not in f.name)
        quick = sorted(RESULTS.glob(f"{name}-quick-*.json"))
        for path in [*full[-1:], *quick[-1:]]:
            data = json.loads(path.read_text())
            machine = data.get("machine", {})
            rows = data.get("table") or data.get("runs") or []
            out += [
                f"## {name}{' (quick)' if '-quick-' in path.name else ''}",
                "",
                f"`python -m bench {name}{' --quick' if data.get('quick') else ''}` — "
                f"{data.get('when', '')[:19]} UTC, {_cpu(machine)}, {machine.get('cpu_count', '?')} CPUs"
                + (f", model {data['model']}" if data.get("model") else "")
                + (
                    f", load average before {data['load_average_before']}"
                    if data.get("load_average_before")
                    else ""
                ),
                "",
            ]
            out += _table(rows) if rows else ["(no table)"]
            out.append("")
            if data.get("details"):
                out += ["Details:", "", *_table(data["details"]), ""]
            if data.get("note"):
                out += [str(data["note"]), ""]
    previous = DOC.read_text() if DOC.exists() else ""
    if KEPT in previous:
        out += [KEPT + previous.split(KEPT, 1)[1].rstrip("\n"), ""]
    DOC.write_text("\n".join(out))
    print(f"wrote {DOC}")
