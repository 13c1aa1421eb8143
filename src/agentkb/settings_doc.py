"""The settings table of docs/configuration.md, generated from `Settings` (each field's default and description).

`python -m agentkb.settings_doc [PATH]` rewrites the table between the two markers of PATH (default
docs/configuration.md); `--check` only says whether it is current (exit status 1 if not)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from agentkb.settings import Settings

BEGIN = (
    "<!-- settings table: generated from agentkb.settings.Settings by `python -m agentkb.settings_doc` -->"
)
END = "<!-- end of the generated settings table -->"
_UNITS = ((1024**3, "GiB"), (1024**2, "MiB"))


def _default(name: str, field: FieldInfo) -> str:
    """The default as the table shows it: the value an environment variable would hold, sizes also in units."""
    extra = field.json_schema_extra
    if isinstance(extra, dict) and "default_shown" in extra:
        return f"`{extra['default_shown']}`"
    value: Any = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if value == [] or value == "":
        return "empty"
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, dict):
        text = json.dumps(value)
    elif isinstance(value, float) and value.is_integer():
        text = str(int(value))
    else:
        text = str(value)
    shown = f"`{text}`"
    if value == {}:
        shown += " (none)"
    if name.endswith("_bytes") and isinstance(value, int):
        shown += next((f" ({value // size} {unit})" for size, unit in _UNITS if value % size == 0), "")
    return shown


def settings_table() -> str:
    """The markdown table of every setting: variable, default, meaning (the field's description)."""
    lines = ["| Variable | Default | Meaning |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        meaning = (field.description or "").replace("|", "\\|")
        lines.append(f"| `AGENTKB_{name.upper()}` | {_default(name, field)} | {meaning} |")
    return "\n".join(lines)


def with_table(document: str) -> str:
    """`document` with the text between its markers replaced by the current table."""
    head, begin, rest = document.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"the document lacks the markers {BEGIN!r} ... {END!r}")
    return f"{head}{BEGIN}\n{settings_table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [a for a in argv if a != "--check"]
    path = Path(paths[0] if paths else "docs/configuration.md")
    current = path.read_text()
    wanted = with_table(current)
    if check:
        if wanted != current:
            print(f"{path}: the settings table is stale; run `python -m agentkb.settings_doc {path}`")
            return 1
        return 0
    path.write_text(wanted)
    print(f"wrote the settings table of {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
