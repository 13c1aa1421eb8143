"""Answers as rows: the columns a SQL query over an agent selects beyond `answer` and its inputs (MindsDB 26.1's
select targets, `SELECT name, population FROM agent WHERE question = '...'`).

The model gets an output tool, `final_result`, taking `{"rows": [{<column>: value, ...}, ...]}` (values are JSON
scalars; a column it leaves out is NULL); it may still answer in plain text, which then fills `answer` and
leaves the other columns NULL, as MindsDB 26.1 does for a text answer.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic_ai import ToolOutput

Scalar = str | int | float | bool | None
OUTPUT_TOOL = "final_result"


class _Rows(BaseModel):
    rows: list[Any]


def rows_output(columns: tuple[str, ...]) -> tuple[list[Any], str]:
    """The run's `output_type` (rows, or text) and the instruction that asks for the rows."""
    fields: dict[str, Any] = {
        f"c{i}": (Scalar, Field(default=None, alias=column)) for i, column in enumerate(columns)
    }
    row = create_model("Row", __config__=ConfigDict(populate_by_name=True, extra="ignore"), **fields)
    rows = create_model("Rows", __base__=_Rows, rows=(list[row], ...))  # type: ignore[valid-type]
    shown = ", ".join(columns)
    tool = ToolOutput(
        rows,
        name=OUTPUT_TOOL,
        description=f"Give the final answer as rows with these columns: {shown}. One row per item.",
    )
    instruction = (
        f"The user expects the answer as a table with the columns {shown}: call {OUTPUT_TOOL} with one row "
        "per item (use null where a value is unknown)."
    )
    return [tool, str], instruction


def rows_of(output: Any, columns: tuple[str, ...]) -> list[dict[str, Any]] | None:
    """The rows a run returned (None for a text answer), keyed by the selected columns."""
    if not isinstance(output, _Rows):
        return None
    return [{column: getattr(row, f"c{i}", None) for i, column in enumerate(columns)} for row in output.rows]
