"""MindsDB's rule for object names in SQL: an unquoted name is lower-cased, a back-quoted one keeps its case
(`mindsdb/api/executor/command_executor.py` `match_one_part_name` / `match_two_part_name` @26.1)."""

from __future__ import annotations

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest


def _parts(identifier: ast.Identifier) -> list[tuple[str, bool]]:
    quoted = list(getattr(identifier, "is_quoted", None) or [])
    quoted += [False] * (len(identifier.parts) - len(quoted))
    return [(str(part), bool(q)) for part, q in zip(identifier.parts, quoted, strict=False)]


def normalize(part: str, quoted: bool) -> str:
    return part if quoted else part.lower()


def one_part(identifier: ast.Identifier) -> str:
    """`name` or `` `Name` ``: a database's or project's name."""
    parts = _parts(identifier)
    if len(parts) != 1:
        raise BadRequest(f"Only single-part names are allowed: {identifier.to_string()}")
    return normalize(*parts[0])


def is_quoted(identifier: ast.Identifier) -> bool:
    """Whether the last part was back-quoted (MindsDB then matches the name exactly: `strict_case`)."""
    return _parts(identifier)[-1][1]


def two_part(identifier: ast.Identifier, default_db: str) -> tuple[str, str]:
    """`[<project>.]<name>` → (project, name); the project defaults to the context database."""
    parts = _parts(identifier)
    if len(parts) == 1:
        return default_db, normalize(*parts[0])
    if len(parts) == 2:
        return normalize(*parts[0]), normalize(*parts[1])
    raise BadRequest(f"Expected <project>.<name>, got {identifier.to_string()}")
