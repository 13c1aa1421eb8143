"""`information_schema` tables and `SHOW ...` answers, with a small evaluator for their WHERE/LIKE.

Every row is masked (`secrecy.mask_secrets`): no secret of a data source, knowledge base or agent is shown."""

from __future__ import annotations

import json
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from mindsdb_sql_parser import ast

from agentkb import patterns
from agentkb.errors import BadRequest
from agentkb.secrecy import mask_secrets
from agentkb.timestamps import optional_timestamp, timestamp

Rows = list[dict[str, Any]]

DATABASE_COLUMNS = ["NAME", "TYPE", "ENGINE", "CONNECTION_DATA"]
KB_COLUMNS = [
    "NAME",
    "PROJECT",
    "EMBEDDING_MODEL",
    "RERANKING_MODEL",
    "STORAGE",
    "METADATA_COLUMNS",
    "CONTENT_COLUMNS",
    "ID_COLUMN",
    "PARAMS",
]
# MindsDB 26.1's NAME, PROJECT, MODEL, PARAMS (MODEL and PARAMS as JSON text; PARAMS holds everything but
# the model, prompt_template and data included, as MindsDB stores them), then agentkb's MODEL_NAME (MindsDB
# 25.14's), PROVIDER, DATA and PROMPT_TEMPLATE.
AGENT_COLUMNS = ["NAME", "PROJECT", "MODEL", "PARAMS", "MODEL_NAME", "PROVIDER", "DATA", "PROMPT_TEMPLATE"]

# MindsDB's JOBS and jobs_history columns; the history's TICK_AT (the tick a run served: MindsDB's RUN_START),
# STATE and INGEST_JOBS (the ingestion jobs its inserts ran as) are agentkb's
JOB_COLUMNS = [
    "NAME",
    "PROJECT",
    "START_AT",
    "END_AT",
    "NEXT_RUN_AT",
    "SCHEDULE_STR",
    "QUERY",
    "IF_QUERY",
    "VARIABLES",
]
JOB_HISTORY_COLUMNS = [
    "NAME",
    "PROJECT",
    "RUN_START",
    "RUN_END",
    "ERROR",
    "QUERY",
    "TICK_AT",
    "STATE",
    "INGEST_JOBS",
]


def job_row(job: Any) -> dict[str, Any]:
    return {
        "NAME": job.name,
        "PROJECT": job.project_name,
        "START_AT": timestamp(job.start_at),
        "END_AT": optional_timestamp(job.end_at),
        "NEXT_RUN_AT": optional_timestamp(job.next_run_at),
        "SCHEDULE_STR": job.schedule_str,
        "QUERY": job.query,
        "IF_QUERY": job.if_query,
        "VARIABLES": job.variables,
    }


def run_row(run: Any) -> dict[str, Any]:
    return {
        "NAME": run.job_name,
        "PROJECT": run.project_name,
        "RUN_START": timestamp(run.run_start),
        "RUN_END": optional_timestamp(run.run_end),
        "ERROR": run.error,
        "QUERY": run.query,
        "TICK_AT": timestamp(run.tick_at),
        "STATE": run.state,
        "INGEST_JOBS": list(run.ingest_job_ids),
    }


def like(value: Any, pattern: str) -> bool:
    """SQL LIKE, case-insensitive (as MySQL's default collation), in linear time (RE2: the pattern is the
    user's)."""
    return patterns.like(value, pattern)


def _value(node: ast.ASTNode, row: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Identifier):
        column = node.parts[-1]
        for key, value in row.items():
            if key.lower() == str(column).lower():
                return value
        raise BadRequest(f"Column not found: {column}")
    if isinstance(node, ast.Tuple):
        return [_value(item, row) for item in node.items]
    if isinstance(node, (ast.BinaryOperation, ast.UnaryOperation)):
        return matches(node, row)
    raise BadRequest(f"Unsupported expression in WHERE: {node.to_string()}")


def _eq(a: Any, b: Any) -> bool:
    return bool(a == b)  # case-sensitive, as MindsDB's (DuckDB's) `=` on information_schema


def matches(where: ast.ASTNode | None, row: dict[str, Any]) -> bool:
    """Evaluate a WHERE tree against one row (string equality is case-sensitive, as in MindsDB)."""
    if where is None:
        return True
    if isinstance(where, ast.UnaryOperation) and where.op.lower() == "not":
        return not matches(where.args[0], row)
    if not isinstance(where, ast.BinaryOperation):
        return bool(_value(where, row))
    op = where.op.lower()
    if op == "and":
        return matches(where.args[0], row) and matches(where.args[1], row)
    if op == "or":
        return matches(where.args[0], row) or matches(where.args[1], row)
    left, right = _value(where.args[0], row), _value(where.args[1], row)
    if op == "=":
        return _eq(left, right)
    if op in ("!=", "<>"):
        return not _eq(left, right)
    if op == "like":
        return like(left, str(right))
    if op == "not like":
        return not like(left, str(right))
    if op == "in":
        return any(_eq(left, r) for r in right)
    if op == "not in":
        return not any(_eq(left, r) for r in right)
    if op in ("<", "<=", ">", ">="):
        try:
            return bool({"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op])
        except TypeError:
            return False
    if op == "is":
        return left is right
    if op == "is not":
        return left is not right
    raise BadRequest(f"Unsupported operator in WHERE: {where.op}")


def database_rows(projects: list[str], sources: list[Any]) -> Rows:
    """MindsDB's rows: CONNECTION_DATA is JSON text (`json.dumps`), with every secret masked."""
    rows: Rows = [
        {"NAME": name, "TYPE": "system", "ENGINE": None, "CONNECTION_DATA": None}
        for name in ("information_schema", "log")
    ]
    rows += [{"NAME": p, "TYPE": "project", "ENGINE": None, "CONNECTION_DATA": None} for p in projects]
    rows.append(
        {"NAME": "files", "TYPE": "data", "ENGINE": "files", "CONNECTION_DATA": "{}"}
    )  # uploaded files
    rows += [
        {
            "NAME": s.name,
            "TYPE": "data",
            "ENGINE": s.engine,
            "CONNECTION_DATA": json.dumps(mask_secrets(s.parameters)),
        }
        for s in sources
    ]
    return rows


def kb_row(kb: Any) -> dict[str, Any]:
    return {
        "NAME": kb.name,
        "PROJECT": kb.project_name,
        "EMBEDDING_MODEL": mask_secrets(kb.embedding_model),
        "RERANKING_MODEL": mask_secrets(kb.reranking_model),
        "STORAGE": f"{kb.params.get('default_vector_storage', 'agentkb_pgvector')}.{kb.storage_table}",
        "METADATA_COLUMNS": kb.metadata_columns,
        "CONTENT_COLUMNS": kb.content_columns,
        "ID_COLUMN": kb.id_column,
        "PARAMS": mask_secrets(kb.params),
    }


def agent_row(agent: Any, project: str) -> dict[str, Any]:
    params = dict(agent.params)
    if agent.prompt_template is not None:
        params["prompt_template"] = agent.prompt_template
    if any(agent.data.values()):
        params["data"] = agent.data
    return {
        "NAME": agent.name,
        "PROJECT": project,
        "MODEL": json.dumps(mask_secrets(agent.model)),
        "PARAMS": json.dumps(mask_secrets(params)),
        "MODEL_NAME": agent.model.get("model_name"),
        "PROVIDER": agent.model.get("provider"),
        "DATA": agent.data,
        "PROMPT_TEMPLATE": agent.prompt_template,
    }


def _sort_key(column: str) -> Callable[[dict[str, Any]], tuple[bool, str]]:
    return lambda row: (row[column] is None, str(row[column]))


def _constant(value: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda _row: value


def select_rows(select: ast.Select, columns: list[str], rows: Rows) -> tuple[list[str], list[list[Any]]]:
    """Project, filter, order and limit in-memory rows for a SELECT over a catalog table."""
    kept = [row for row in rows if matches(select.where, row)]
    for order in reversed(select.order_by or []):
        name = str(order.field.parts[-1]) if isinstance(order.field, ast.Identifier) else ""
        found = next((c for c in columns if c.lower() == name.lower()), None)
        if found is None:
            raise BadRequest(f"Column not found: {name}")
        kept.sort(key=_sort_key(found), reverse=order.direction.upper() == "DESC")
    if select.limit is not None:
        kept = kept[: int(select.limit.value)]
    names: list[str] = []
    getters: list[Callable[[dict[str, Any]], Any]] = []
    for target in select.targets:
        if isinstance(target, ast.Star):
            names += columns
            getters += [itemgetter(c) for c in columns]
        elif isinstance(target, ast.Constant):  # `SELECT NAME, 1`, or a bound `:x`: one value in every row
            names.append(target.alias.parts[-1] if target.alias else str(target.value))
            getters.append(_constant(target.value))
        elif isinstance(target, ast.Identifier):
            column = str(target.parts[-1])
            key = next((c for c in columns if c.lower() == column.lower()), None)
            if key is None:
                raise BadRequest(f"Column not found: {column}")
            names.append(target.alias.parts[-1] if target.alias else column)
            getters.append(itemgetter(key))
        else:
            raise BadRequest(f"Unsupported select target: {target.to_string()}")
    return names, [[get(row) for get in getters] for row in kept]
